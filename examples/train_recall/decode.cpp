// SPDX-License-Identifier: MIT
// abc example: the associative-recall model trained in PyTorch (train.py), decoded in C++ one token
// at a time from its weights file, with no Python: abc::load_weights, then the streaming path
// (BoundedAttention::step_into with a constant-size state), checked against PyTorch's logits.
//
//   decode DIR [TOLERANCE]     reads DIR/recall_mlp.abcw and DIR/reference.abcw (train.py writes both)
//
// The model, as train.py defines it (every weight in nn.Linear's [out, in] layout):
//   h = key_embed[token / (values + 1)] + value_embed[token % (values + 1)]     [d]
//   q, k, v = W_q h, W_k h, W_v h    [d] each
//   a = ABC-MLP step(q, k, v; x = h), W_φ [slots x d] reading the block input
//   logits = W_head (h + W_o a) + b_head
// Prints the largest absolute difference of the logits from PyTorch's (and relative to the largest
// logit), the answers' accuracy, and how often the answer agrees with PyTorch's; exits 1 when a
// difference exceeds TOLERANCE (default 1e-5, relative to the largest |logit|).
#include <abc/bounded_attention.hpp>
#include <abc/control/mlp.hpp>
#include <abc/weights.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using abc::Index;
using Mat = abc::Matrix<float>;
using Vec = abc::Vector<float>;

/// The recall model of train.py, from its weights file; every tensor's shape is checked on load.
class RecallModel {
 public:
  explicit RecallModel(const abc::Weights& w)
      : d_(w.get_int("d_model")),
        keys_(w.get_int("keys")),
        values_(w.get_int("values")),
        key_embed_(w.matrix<float>("key_embed.weight", keys_, d_)),
        value_embed_(w.matrix<float>("value_embed.weight", values_ + 1, d_)),
        w_q_(w.matrix<float>("w_q.weight", d_, d_)),
        w_k_(w.matrix<float>("w_k.weight", d_, d_)),
        w_v_(w.matrix<float>("w_v.weight", d_, d_)),
        w_o_(w.matrix<float>("w_o.weight", d_, d_)),
        head_(w.matrix<float>("head.weight", values_, d_)),
        bias_(w.vector<float>("head.bias", values_)),
        attn_(abc::control::Mlp<float>(w.matrix<float>("attention.w_phi", w.get_int("slots"), d_),
                                       abc::control::activation_from_name(w.get_string("activation")),
                                       abc::control::normalization_from_name(w.get_string("normalization"))),
              options(w)),
        h_(d_), q_(d_), k_(d_), v_(d_), a_(d_) {
    if (w.get_string("control") != "mlp")
      throw std::runtime_error("metadata 'control' is '" + w.get_string("control") + "', expected mlp");
  }

  Index vocab_in() const noexcept { return keys_ * (values_ + 1); }
  Index values() const noexcept { return values_; }
  abc::State<float> make_state() const { return attn_.make_state(d_, d_); }

  /// One token through the model, continuing `state`: the logits over the values.
  void step(abc::State<float>& state, Index token, Vec& logits) {
    h_ = (key_embed_.row(token / (values_ + 1)) + value_embed_.row(token % (values_ + 1))).transpose();
    q_.noalias() = w_q_ * h_;
    k_.noalias() = w_k_ * h_;
    v_.noalias() = w_v_ * h_;
    attn_.step_into(state, q_, k_, v_, a_, h_);  // the control reads the block input h
    h_.noalias() += w_o_ * a_;
    logits = bias_;
    logits.noalias() += head_ * h_;
  }

 private:
  static abc::Options options(const abc::Weights& w) {
    abc::Options o;
    o.scale = w.get_float("scale");  // 0: 1/sqrt(d), as in PyTorch's layer
    o.chunk = w.get_int("chunk");
    return o;
  }

  Index d_, keys_, values_;
  Mat key_embed_, value_embed_, w_q_, w_k_, w_v_, w_o_, head_;
  Vec bias_;
  abc::BoundedAttention<abc::control::Mlp<float>> attn_;
  Vec h_, q_, k_, v_, a_;
};

Index argmax(const Vec& v) {
  Index i = 0;
  v.maxCoeff(&i);
  return i;
}

int run(const std::string& dir, double tolerance) {
  const abc::Weights model_file = abc::load_weights(dir + "/recall_mlp.abcw");
  const abc::Weights reference = abc::load_weights(dir + "/reference.abcw");
  RecallModel model(model_file);
  const abc::Matrix<double> tokens = reference.matrix<double>("tokens");
  const Index sequences = tokens.rows(), length = tokens.cols();
  const abc::Matrix<double> targets = reference.matrix<double>("targets", sequences, length);
  const std::vector<Index> logits_shape = reference.shape("logits");
  const Index vocab_out = model.values();
  if (logits_shape != std::vector<Index>{sequences, length, vocab_out})
    throw std::runtime_error("reference.abcw: logits are not [sequences x length x vocab_out]");
  const std::vector<float> expected = reference.values<float>("logits");

  std::cout << "decoding " << sequences << " sequences of " << length << " tokens with ABC-MLP ("
            << model_file.get_int("slots") << " slots, d = " << model_file.get_int("d_model") << ") from "
            << dir << "/recall_mlp.abcw\n";
  double max_abs = 0, max_logit = 0;
  Index answered = 0, correct = 0, agree = 0;
  Vec logits(vocab_out);
  for (Index s = 0; s < sequences; ++s) {
    abc::State<float> state = model.make_state();  // constant size, whatever the length
    for (Index t = 0; t < length; ++t) {
      const auto token = static_cast<Index>(tokens(s, t));
      if (token < 0 || token >= model.vocab_in()) throw std::runtime_error("reference.abcw: a token out of range");
      model.step(state, token, logits);
      const Eigen::Map<const Vec> torch(expected.data() + (s * length + t) * vocab_out, vocab_out);
      max_abs = std::max(max_abs, double((logits - torch).cwiseAbs().maxCoeff()));
      max_logit = std::max(max_logit, double(torch.cwiseAbs().maxCoeff()));
      if (targets(s, t) >= 0) {
        ++answered;
        correct += argmax(logits) == static_cast<Index>(targets(s, t));
        agree += argmax(logits) == argmax(torch);
      }
    }
  }
  const double relative = max_abs / max_logit;
  std::cout << "logits against PyTorch's: max |difference| " << max_abs << ", relative to the largest |logit| ("
            << max_logit << ") " << relative << "\n"
            << "answers: " << correct << " of " << answered << " correct, " << agree << " of " << answered
            << " the same as PyTorch's\n";
  if (!(relative <= tolerance)) {
    std::cout << "FAILED: the difference exceeds " << tolerance << " of the largest logit\n";
    return 1;
  }
  std::cout << "ok: C++ decodes PyTorch's model to rounding (tolerance " << tolerance << ")\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: decode DIR [TOLERANCE]   (DIR: where train.py wrote recall_mlp.abcw and reference.abcw)\n";
    return 2;
  }
  try {
    return run(argv[1], argc > 2 ? std::atof(argv[2]) : 1e-5);
  } catch (const std::exception& e) {
    std::cerr << "decode: " << e.what() << '\n';
    return 1;
  }
}
