// SPDX-License-Identifier: MIT
// The C++ side of python.bit_for_bit: fixed inputs through BoundedAttention's calls (forward,
// forward_causal, backward, backward_causal, and a step loop) and MultiHeadAttention's (forward,
// forward_causal, and a pooled prefill with batched decode steps), each written as a .npy file with
// the inputs themselves, so that the Python test feeds abc_attention exactly these numbers and
// compares with np.array_equal. And the C++ side of python.weights: a weights file read by
// abc::load_weights and described value by value (bit patterns), written back, and one written from
// C++.
//
//     abc_python_reference DIR                       writes DIR/<case>/<name>.npy
//     abc_python_reference --weights IN ECHO OURS    prints IN's contents, writes IN back to ECHO
//                                                    and abc's own file to OURS
#include <abc/abc.hpp>
#include <abc/weights.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "../has_backward.hpp"

namespace {

namespace fs = std::filesystem;

// .npy version 1.0, C order, little-endian (the machines abc's tests run on are).
template <class T>
void write_npy(const fs::path& path, const T* data, const std::vector<abc::Index>& shape) {
  std::string dims;  // "3," for one dimension (a Python tuple), "3, 4" for more
  abc::Index count = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dims += (i > 0 ? ", " : "") + std::to_string(shape[i]);
    count *= shape[i];
  }
  if (shape.size() == 1) dims += ",";
  std::string header = std::string("{'descr': '<f") + (sizeof(T) == 8 ? "8" : "4") +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // The magic, version and length take 10 bytes; the header ends in '\n' and pads the whole to 64.
  const std::size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  const auto len = static_cast<std::uint16_t>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(len_bytes, 2);
  f << header;
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(sizeof(T) * std::size_t(count)));
  if (!f) throw std::runtime_error("cannot write " + path.string());
}

template <class T>
void write(const fs::path& dir, const std::string& name, const abc::Matrix<T>& m) {
  write_npy(dir / (name + ".npy"), m.data(), {m.rows(), m.cols()});
}
template <class T>
void write(const fs::path& dir, const std::string& name, const abc::Vector<T>& v) {
  write_npy(dir / (name + ".npy"), v.data(), {v.size()});
}
// A matrix whose row-major elements are an array of `shape` (e.g. [batch, seq, heads, dim]).
template <class T>
void write(const fs::path& dir, const std::string& name, const abc::Matrix<T>& m,
           const std::vector<abc::Index>& shape) {
  write_npy(dir / (name + ".npy"), m.data(), shape);
}

// Deterministic values of unit scale, different for every (salt, row, column): the same numbers in
// every build, without depending on a random number generator's implementation.
template <class T>
abc::Matrix<T> fill(abc::Index rows, abc::Index cols, double salt) {
  abc::Matrix<T> m(rows, cols);
  for (abc::Index i = 0; i < rows; ++i)
    for (abc::Index j = 0; j < cols; ++j)
      m(i, j) = T(std::sin(1.7 * double(i) + 0.61 * double(j) * (1.0 + 0.1 * salt) + salt) * 1.3);
  return m;
}

struct Sizes {
  abc::Index n_tok = 37, d = 8, dv = 6, n = 5, d_x = 7;   // partial chunks with chunk = 16
};

// Writes every input and output of one attention to dir. The control input x is given when
// `with_x`; the parameters were written by the caller. Without `causal` only forward runs (a control
// that fits itself to the whole input, as Cluster's k-means); backward only where abc has it.
template <class Control>
void run_case(const fs::path& dir, const abc::BoundedAttention<Control>& attn, bool with_x, const Sizes& s,
              bool causal = true) {
  using T = typename Control::scalar_type;
  const abc::Matrix<T> q = fill<T>(s.n_tok, s.d, 1), k = fill<T>(s.n_tok, s.d, 2), v = fill<T>(s.n_tok, s.dv, 3);
  const abc::Matrix<T> x = fill<T>(s.n_tok, s.d_x, 4), d_out = fill<T>(s.n_tok, s.dv, 5);
  write(dir, "q", q);
  write(dir, "k", k);
  write(dir, "v", v);
  write(dir, "d_out", d_out);
  if (with_x) write(dir, "x", x);
  using Rows = typename abc::BoundedAttention<Control>::Rows;
  const Rows xr = with_x ? Rows(x) : Rows();
  write(dir, "forward", attn.forward(q, k, v, xr));
  if (!causal) return;
  write(dir, "forward_causal", attn.forward_causal(q, k, v, xr));
  if constexpr (abc_python::has_backward<Control>) {
    const auto write_gradients = [&](const std::string& prefix, const abc::Gradients<Control>& g) {
      write(dir, prefix + "q", g.q);
      write(dir, prefix + "k", g.k);
      write(dir, prefix + "v", g.v);
      if (with_x) write(dir, prefix + "x", g.x);
      if constexpr (std::is_same_v<Control, abc::control::Mlp<T>>) write(dir, prefix + "w_phi", g.control.w_phi);
      if constexpr (std::is_same_v<Control, abc::control::SlotGates<T>>) {
        write(dir, prefix + "w_f", g.control.w_f);
        write(dir, prefix + "b_f", g.control.b_f);
      }
      if constexpr (std::is_same_v<Control, abc::control::Linformer<T>>) write(dir, prefix + "w_lf", g.control.w_lf);
      if constexpr (std::is_same_v<Control, abc::control::RandomFeature<T>>) {
        write(dir, prefix + "w", g.control.w);
        write(dir, prefix + "w_g", g.control.w_g);
        write(dir, prefix + "b_g", abc::Matrix<T>(abc::Matrix<T>::Constant(1, 1, g.control.b_g)));
      }
    };
    write_gradients("backward.", attn.backward(q, k, v, d_out, xr));
    write_gradients("backward_causal.", attn.backward_causal(q, k, v, d_out, xr));
  }
  // The step loop, one token at a time, then the first half by forward_causal and the rest stepped.
  auto state = attn.make_state(s.d, s.dv);
  abc::Matrix<T> stepped(s.n_tok, s.dv);
  for (abc::Index t = 0; t < s.n_tok; ++t) {
    using Row = typename abc::BoundedAttention<Control>::Row;
    const abc::Vector<T> x_t = x.row(t).transpose();
    stepped.row(t) = attn.step(state, q.row(t).transpose(), k.row(t).transpose(), v.row(t).transpose(),
                               with_x ? Row(x_t) : Row())
                         .transpose();
  }
  write(dir, "step", stepped);
  write(dir, "state.keys", abc::Matrix<T>(state.keys()));
  write(dir, "state.values", state.values());
  const abc::Index half = s.n_tok / 2;
  auto split = attn.make_state(s.d, s.dv);
  const Rows x_head = with_x ? Rows(x.topRows(half)) : Rows();
  const Rows x_tail = with_x ? Rows(x.bottomRows(s.n_tok - half)) : Rows();
  abc::Matrix<T> continued(s.n_tok, s.dv);
  continued.topRows(half) = attn.forward_causal(split, q.topRows(half), k.topRows(half), v.topRows(half), x_head);
  continued.bottomRows(s.n_tok - half) = attn.forward_causal(split, q.bottomRows(s.n_tok - half),
                                                             k.bottomRows(s.n_tok - half),
                                                             v.bottomRows(s.n_tok - half), x_tail);
  write(dir, "forward_causal_state", continued);
}

template <class T>
void write_cases(const fs::path& root, const std::string& suffix) {
  namespace ctl = abc::control;
  const Sizes s;
  {
    const fs::path dir = root / ("mlp_" + suffix);
    fs::create_directories(dir);
    const abc::Matrix<T> w_phi = fill<T>(s.n, s.d_x, 6);
    write(dir, "w_phi", w_phi);
    run_case(dir, abc::BoundedAttention{ctl::Mlp<T>{w_phi}}, true, s);
  }
  {
    const fs::path dir = root / ("mlp_keys_" + suffix);   // the control reads the keys: d_x = d
    fs::create_directories(dir);
    const abc::Matrix<T> w_phi = fill<T>(s.n, s.d, 7);
    write(dir, "w_phi", w_phi);
    run_case(dir, abc::BoundedAttention{ctl::Mlp<T>{w_phi, ctl::Activation::sigmoid, ctl::Normalization::per_token}},
             false, s);
  }
  {
    const fs::path dir = root / ("sliding_window_" + suffix);
    fs::create_directories(dir);
    run_case(dir, abc::BoundedAttention{ctl::SlidingWindow<T>{s.n}}, false, s);
  }
  {
    const fs::path dir = root / ("slot_gates_" + suffix);
    fs::create_directories(dir);
    const abc::Matrix<T> w_f = fill<T>(s.n, s.d_x, 8);
    const abc::Vector<T> b_f = fill<T>(s.n, 1, 9).col(0);
    write(dir, "w_f", w_f);
    write(dir, "b_f", b_f);
    abc::Options o;
    o.scale = 1.0;
    run_case(dir, abc::BoundedAttention{ctl::SlotGates<T>{w_f, b_f, T(4)}, o}, true, s);
  }
  {
    const fs::path dir = root / ("linformer_" + suffix);
    fs::create_directories(dir);
    const abc::Matrix<T> w_lf = fill<T>(s.n, 40, 10);
    write(dir, "w_lf", w_lf);
    run_case(dir, abc::BoundedAttention{ctl::Linformer<T>{w_lf}}, false, s);
  }
  {
    const fs::path dir = root / ("top_k_eviction_" + suffix);  // TRAMS's score of the keys
    fs::create_directories(dir);
    const abc::Matrix<T> w_q = fill<T>(s.d, s.d_x, 11);
    write(dir, "w_q", w_q);
    run_case(dir, abc::BoundedAttention{ctl::TopKEviction<T>{abc::Slots{s.n}, 2, abc::select::KeyScore<T>{w_q}}}, false,
             s);
  }
  {
    const fs::path dir = root / ("cluster_" + suffix);
    fs::create_directories(dir);
    const abc::Matrix<T> centroids = fill<T>(s.n, s.d_x, 12);
    write(dir, "centroids", centroids);
    run_case(dir, abc::BoundedAttention{ctl::Cluster<T>{centroids}}, true, s);
  }
  {
    const fs::path dir = root / ("cluster_kmeans_" + suffix);  // fitted by forward: no causal forms
    fs::create_directories(dir);
    run_case(dir, abc::BoundedAttention{ctl::Cluster<T>{abc::Slots{s.n}, s.d_x, abc::Seed{3}}}, true, s, false);
  }
  {
    const fs::path dir = root / ("global_tokens_" + suffix);
    fs::create_directories(dir);
    run_case(dir, abc::BoundedAttention{ctl::GlobalTokens<T>{{0, 3, 10, 20, 36}}}, false, s);
  }
  {
    const fs::path dir = root / ("local_global_" + suffix);
    fs::create_directories(dir);
    using LocalGlobal = ctl::Concat<ctl::GlobalTokens<T>, ctl::SlidingWindow<T>>;
    run_case(dir, abc::BoundedAttention{LocalGlobal{ctl::GlobalTokens<T>{{0, 1, 17}}, ctl::SlidingWindow<T>{4}}},
             false, s);
  }
  {
    const fs::path dir = root / ("random_feature_" + suffix);  // gated RFA reading x
    fs::create_directories(dir);
    const abc::Matrix<T> w = fill<T>(6, s.d, 13);
    const abc::Vector<T> w_g = fill<T>(s.d_x, 1, 14).col(0);
    write(dir, "w", w);
    write(dir, "w_g", w_g);
    run_case(dir,
             abc::BoundedAttention{ctl::RandomFeature<T>{abc::feature::RandomFourier<T>{w}, w_g, T(0.25)}}, true, s);
  }
}

// MultiHeadAttention<Mlp>: batch sequences of n_tok tokens, heads query heads over kv_heads
// key/value heads (grouped-query attention), arrays in the [batch, seq, heads, dim] layout (a
// row-major matrix [batch · seq, heads · dim]).
struct HeadSizes {
  abc::Index batch = 3, heads = 4, kv_heads = 2, prefill = 20;
};

// Writes forward, forward_causal, and a decode: sequences ids prefilled with their first
// `prefill` tokens, then one batched step per further token with the batch in `order` (a
// permutation of the sequences, so that a call's batch entry and its id differ), and every
// sequence's states at the end.
template <class T>
void run_multi_head_case(const fs::path& dir, const abc::MultiHeadAttention<abc::control::Mlp<T>>& mha, bool with_x,
                         const Sizes& s, const HeadSizes& h) {
  using In = abc::HeadTensor<const T>;
  using Out = abc::HeadTensor<T>;
  const abc::Index b_n = h.batch, len = s.n_tok, hq = h.heads, hk = h.kv_heads;
  const abc::Matrix<T> q = fill<T>(b_n * len, hq * s.d, 21), k = fill<T>(b_n * len, hk * s.d, 22);
  const abc::Matrix<T> v = fill<T>(b_n * len, hk * s.dv, 23), x = fill<T>(b_n * len, s.d_x, 24);
  write(dir, "q", q, {b_n, len, hq, s.d});
  write(dir, "k", k, {b_n, len, hk, s.d});
  write(dir, "v", v, {b_n, len, hk, s.dv});
  if (with_x) write(dir, "x", x, {b_n, len, 1, s.d_x});
  // Tokens [t0, t0 + count) of every sequence, in place: strides of the whole arrays.
  const auto part = [&](const abc::Matrix<T>& m, abc::Index heads, abc::Index dim, abc::Index t0, abc::Index count) {
    return In::strided(m.data() + t0 * heads * dim, b_n, count, heads, dim, len * heads * dim, heads * dim, dim);
  };
  const auto run = [&](auto&& call, abc::Index t0, abc::Index count) {
    abc::Matrix<T> out(b_n * count, hq * s.dv);
    const In xt = part(x, 1, s.d_x, t0, count);
    call(part(q, hq, s.d, t0, count), part(k, hk, s.d, t0, count), part(v, hk, s.dv, t0, count),
         with_x ? &xt : nullptr, Out::bshd(out.data(), b_n, count, hq, s.dv));
    return out;
  };
  const auto forward = [&](const In& qt, const In& kt, const In& vt, const In* xt, const Out& o) {
    if (xt) mha.forward(qt, kt, vt, *xt, o);
    else mha.forward(qt, kt, vt, o);
  };
  const auto causal = [&](const In& qt, const In& kt, const In& vt, const In* xt, const Out& o) {
    if (xt) mha.forward_causal(qt, kt, vt, *xt, o);
    else mha.forward_causal(qt, kt, vt, o);
  };
  write(dir, "forward", run(forward, 0, len), {b_n, len, hq, s.dv});
  write(dir, "forward_causal", run(causal, 0, len), {b_n, len, hq, s.dv});

  const std::vector<std::uint64_t> ids = {7, 3, 11};
  const std::vector<std::size_t> order = {2, 0, 1};
  typename abc::MultiHeadAttention<abc::control::Mlp<T>>::Pool pool;
  for (std::uint64_t id : ids) mha.add(pool, id, s.d, s.dv);
  const auto prefill = [&](const In& qt, const In& kt, const In& vt, const In* xt, const Out& o) {
    if (xt) mha.forward_causal(pool, ids, qt, kt, vt, *xt, o);
    else mha.forward_causal(pool, ids, qt, kt, vt, o);
  };
  write(dir, "prefill", run(prefill, 0, h.prefill), {b_n, h.prefill, hq, s.dv});
  // Each step's token of sequence order[j] as batch entry j, gathered into [batch, 1, heads, dim].
  const auto gather = [&](const abc::Matrix<T>& m, abc::Index t) {
    abc::Matrix<T> g(b_n, m.cols());
    for (abc::Index j = 0; j < b_n; ++j) g.row(j) = m.row(abc::Index(order[std::size_t(j)]) * len + t);
    return g;
  };
  std::vector<std::uint64_t> step_ids;
  for (std::size_t j : order) step_ids.push_back(ids[j]);
  const abc::Index steps = len - h.prefill;
  abc::Matrix<T> decoded(steps * b_n, hq * s.dv);
  for (abc::Index t = h.prefill; t < len; ++t) {
    const abc::Matrix<T> qt = gather(q, t), kt = gather(k, t), vt = gather(v, t), xt = gather(x, t);
    const Out o = Out::bshd(decoded.data() + (t - h.prefill) * b_n * hq * s.dv, b_n, 1, hq, s.dv);
    const In qi = In::bshd(qt.data(), b_n, 1, hq, s.d), ki = In::bshd(kt.data(), b_n, 1, hk, s.d);
    const In vi = In::bshd(vt.data(), b_n, 1, hk, s.dv);
    if (with_x) mha.forward_causal(pool, step_ids, qi, ki, vi, In::bshd(xt.data(), b_n, 1, 1, s.d_x), o);
    else mha.forward_causal(pool, step_ids, qi, ki, vi, o);
  }
  write(dir, "decode", decoded, {steps, b_n, hq, s.dv});
  for (std::uint64_t id : ids)
    for (abc::Index m = 0; m < mha.memories(); ++m) {
      const auto& st = pool.states(id)[std::size_t(m)];
      const std::string name = "pool." + std::to_string(id) + "." + std::to_string(m) + ".";
      write(dir, name + "keys", abc::Matrix<T>(st.keys()));
      write(dir, name + "values", st.values());
    }
}

// `memories` ABC-MLP controls, memory i's W_φ [n × d_x] filled with salt + i, all written as w_phi
// [memories, n, d_x].
template <class T>
std::vector<abc::control::Mlp<T>> mlp_controls(
    const fs::path& dir, abc::Index memories, abc::Index n, abc::Index d_x, double salt,
    abc::control::Activation activation = abc::control::Activation::exp,
    abc::control::Normalization normalization = abc::control::Normalization::prefix) {
  abc::Matrix<T> w_phi(memories * n, d_x);
  std::vector<abc::control::Mlp<T>> controls;
  for (abc::Index i = 0; i < memories; ++i) {
    w_phi.middleRows(i * n, n) = fill<T>(n, d_x, salt + double(i));
    controls.emplace_back(abc::Matrix<T>(w_phi.middleRows(i * n, n)), activation, normalization);
  }
  write(dir, "w_phi", w_phi, {memories, n, d_x});
  return controls;
}

template <class T>
void write_multi_head_cases(const fs::path& root, const std::string& suffix) {
  namespace ctl = abc::control;
  using Mha = abc::MultiHeadAttention<ctl::Mlp<T>>;
  const Sizes s;
  const HeadSizes h;
  {
    // One control per query head (each its own W_φ), reading the layer input x shared by all.
    const fs::path dir = root / ("mha_x_" + suffix);
    fs::create_directories(dir);
    run_multi_head_case(dir, Mha(mlp_controls<T>(dir, h.heads, s.n, s.d_x, 30), h.heads, h.kv_heads), true, s, h);
  }
  {
    // One control per key/value head, reading its keys; its query heads share the memory.
    const fs::path dir = root / ("mha_keys_" + suffix);
    fs::create_directories(dir);
    abc::Options o;
    o.chunk = 8;
    const auto controls =
        mlp_controls<T>(dir, h.kv_heads, s.n, s.d, 40, ctl::Activation::sigmoid, ctl::Normalization::per_token);
    run_multi_head_case(dir, Mha(controls, h.heads, h.kv_heads, o), false, s, h);
  }
}

// One line per tensor and metadata entry, every value as its IEEE bit pattern in hex, so that the
// Python side can check that C++ decoded each bit:
//   tensor <name> <float32|float64> <rank> <dims...> <bits...>
//   meta <key> int <value> | meta <key> float <bits> | meta <key> string <hex of the bytes>
template <class T>
void describe_tensor(const abc::Weights& w, const std::string& name) {
  std::cout << "tensor " << name << ' ' << (sizeof(T) == 4 ? "float32" : "float64") << ' ' << w.shape(name).size();
  for (const abc::Index d : w.shape(name)) std::cout << ' ' << d;
  for (const T x : w.values<T>(name)) {
    std::uint64_t b = 0;
    std::memcpy(&b, &x, sizeof(T));
    std::cout << ' ' << std::hex << b << std::dec;
  }
  std::cout << '\n';
}

void describe(const abc::Weights& w) {
  for (const std::string& name : w.names()) {
    if (w.dtype(name) == abc::Weights::DType::float32)
      describe_tensor<float>(w, name);
    else
      describe_tensor<double>(w, name);
  }
  for (const std::string& key : w.meta_keys()) {
    std::cout << "meta " << key << ' ';
    switch (w.meta_kind(key)) {
      case abc::Weights::MetaKind::int64: std::cout << "int " << w.get_int(key); break;
      case abc::Weights::MetaKind::float64: {
        const double f = w.get_float(key);
        std::uint64_t b = 0;
        std::memcpy(&b, &f, 8);
        std::cout << "float " << std::hex << b << std::dec;
        break;
      }
      case abc::Weights::MetaKind::string:
        std::cout << "string ";
        for (const char c : w.get_string(key))
          std::cout << std::hex << std::setw(2) << std::setfill('0') << int(static_cast<unsigned char>(c)) << std::dec;
    }
    std::cout << '\n';
  }
}

// The file C++ writes for Python to read: values exact in both languages (small integers over
// powers of two) and the awkward ones, in both dtypes, with one entry of each metadata kind.
abc::Weights ours() {
  abc::Weights w;
  abc::Matrix<float> m(3, 5);
  for (abc::Index i = 0; i < m.size(); ++i) m.data()[i] = float(i * 37 % 101 - 50) / 64.0f;
  w.add("proj.weight", m);
  abc::Vector<double> b(4);
  b << -0.0, 1e-310, std::numeric_limits<double>::infinity(), -1.5;
  w.add("proj.bias", b);
  std::vector<float> cube(24);
  for (std::size_t i = 0; i < cube.size(); ++i) cube[i] = float(i) - 11.5f;
  w.add<float>("cube", {2, 3, 4}, cube);
  w.add<double>("scalar", {}, {0.1});
  w.set_string("control", "mlp");
  w.set_int("slots", -9007199254740993LL);  // not a double: must travel as an integer
  w.set_float("tau", 8.25);
  return w;
}

int weights_mode(const std::string& in, const std::string& echo, const std::string& out) {
  const abc::Weights w = abc::load_weights(in);
  describe(w);
  abc::save_weights(w, echo);
  abc::save_weights(ours(), out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && std::string(argv[1]) == "--weights") {
    try {
      return weights_mode(argv[2], argv[3], argv[4]);
    } catch (const std::exception& e) {
      std::cerr << "abc_python_reference: " << e.what() << '\n';
      return 1;
    }
  }
  if (argc != 2) {
    std::cerr << "usage: abc_python_reference DIR | --weights IN ECHO OURS\n";
    return 2;
  }
  try {
    write_cases<double>(argv[1], "float64");
    write_cases<float>(argv[1], "float32");
    write_multi_head_cases<double>(argv[1], "float64");
    write_multi_head_cases<float>(argv[1], "float32");
  } catch (const std::exception& e) {
    std::cerr << "abc_python_reference: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
