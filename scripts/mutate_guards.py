#!/usr/bin/env python3
"""Which error checks of a header no test notices: a mutation sweep of its guards.

    scripts/mutate_guards.py HEADER TEST [TEST ...] [--lines N,M,...]

HEADER is a path under include/ (abc/state_io.hpp), each TEST a path under tests/
(test_state_io.cpp). Every `if (...)` of HEADER whose next few lines report an error (a raise, a
throw, a *_problem or *_failure return, a blob_error or a message literal) is made never to fire,
one at a time: `if (c)` becomes `if (false && (c))`, `if (auto p = e)` becomes
`if (auto p = e; false)`. For each such mutant the test files are compiled alone against a copy of
include/ holding it, and run; the mutant is *killed* when a test fails, and *survives* when every
test passes, which means no test reads that check's message. A survivor is either a missing test
or a check that cannot fire (then remove it). Nothing in the tree is written: the copies and the
programs live in a temporary directory. Debian's g++, Eigen and Catch2 (scripts/setup.sh --tests).
Slow by design (one compile per mutant and test): give it the tests that cover the header.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORTS = re.compile(r'raise\(|ABC_THROW|blob_error|_problem\(|_failure\(|return "|fail\(')
FLAGS = ['-std=c++17', '-O1', '-march=native', '-DNDEBUG', '-w', '-isystem', '/usr/include/eigen3',
         '-I' + os.path.join(ROOT, 'tests'), '-DABC_TEST_DATA_DIR="%s"' % os.path.join(ROOT, 'tests', 'data')]


def guards(lines):
    """The line indices of the `if` statements that guard an error report."""
    for i, line in enumerate(lines):
        if re.match(r'^\s*(?:else )?if \((?!constexpr)', line) and REPORTS.search('\n'.join(lines[i:i + 6])):
            yield i


def mutate(text, start):
    """`text` with the `if (` at offset `start` made never to fire, or None where it cannot be."""
    open_at = start + text[start:].index('(')
    depth, j = 0, open_at
    for j in range(open_at, len(text)):
        depth += {'(': 1, ')': -1}.get(text[j], 0)
        if depth == 0:
            break
    cond = text[open_at + 1:j]
    if re.match(r'\s*(auto|const)\b', cond):
        if ';' in cond:  # an initialiser and a condition already: not handled
            return None
        new = cond + '; false'
    else:
        new = 'false && (' + cond + ')'
    return text[:open_at + 1] + new + text[j:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('header', help='a path under include/, e.g. abc/state_io.hpp')
    ap.add_argument('tests', nargs='+', help='paths under tests/, e.g. test_state_io.cpp')
    ap.add_argument('--lines', default='', help='only the guards on these lines (comma-separated)')
    args = ap.parse_args()
    source = open(os.path.join(ROOT, 'include', args.header)).read()
    lines = source.split('\n')
    only = {int(x) for x in args.lines.split(',') if x}
    sites = [i for i in guards(lines) if not only or i + 1 in only]
    print('%s: %d guards' % (args.header, len(sites)), flush=True)
    work = tempfile.mkdtemp(prefix='abc-mutants-')
    survivors = 0
    try:
        main_obj = os.path.join(work, 'catch_main.o')
        with open(os.path.join(work, 'catch_main.cpp'), 'w') as f:
            f.write('#define CATCH_CONFIG_MAIN\n#include "support/catch.hpp"\n')
        subprocess.run(['g++'] + FLAGS + ['-c', os.path.join(work, 'catch_main.cpp'), '-o', main_obj], check=True)
        include = os.path.join(work, 'include')
        for i in sites:
            mutant = mutate(source, sum(len(x) + 1 for x in lines[:i]))
            where = 'line %d: %s' % (i + 1, lines[i].strip()[:90])
            if mutant is None:
                print('skipped  ' + where, flush=True)
                continue
            shutil.rmtree(include, ignore_errors=True)
            shutil.copytree(os.path.join(ROOT, 'include'), include)
            with open(os.path.join(include, args.header), 'w') as f:
                f.write(mutant)
            verdict = 'SURVIVED'
            for test in args.tests:
                exe = os.path.join(work, 'test')
                built = subprocess.run(['g++'] + FLAGS + ['-I' + include, os.path.join(ROOT, 'tests', test), main_obj,
                                        '-o', exe], capture_output=True, text=True)
                if built.returncode != 0:
                    verdict = 'no build'
                    print(built.stderr[:2000], file=sys.stderr)
                    break
                if subprocess.run([exe], capture_output=True).returncode != 0:
                    verdict = 'killed  '
                    break
            survivors += verdict == 'SURVIVED'
            print(verdict + ' ' + where, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print('%d survived' % survivors)
    return 1 if survivors else 0


if __name__ == '__main__':
    sys.exit(main())
