#!/usr/bin/env python3
"""Command-line robustness test of `wgllm`: no argument list crashes the process.

Runs every subcommand (run, chat, devices, models, tokenize, perplexity, bench, bench ab, bench
synthetic, bench multi-turn, bench attention, bench long-context; not `pull`, which downloads: scripts/pull_model_test.py
tests it offline) with boundary and pseudo-random arguments - 0, 1, -1, 2^32,
2^64, huge, NaN, inf, empty strings, non-numbers, missing files, directories given as files,
unknown flags and subcommands - and checks that each process exits by itself with a status code
(no signal: no SIGSEGV, SIGFPE, SIGABRT), within a time limit, with a status in {0, 1, 2, 3}
(70, an escaped internal exception, is a failure too), and that a command-line error (status 2)
is one line on stderr. Pinned cases check specific outcomes (the crashes this test was written
for: `bench --reps 0`, `bench --gen 0/1`, `bench attention --kv-heads 0`).

Most cases are refused at parse time (milliseconds); the few that load a model use the tiny
fixtures on --backend cpu. Deterministic: a fixed seed (--seed) picks the random cases.

usage: cli_fuzz_test.py WGLLM SOURCE_DIR [--seed N] [--random-cases N] [--combinations N] [--timeout S]
                       [--jobs N] [--pinned-only] [--verbose]
"""
import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

# Values every numeric or text option is tried with.
BOUNDARY = [
    "0", "1", "-1", "2", "-0", "3", "4294967295", "4294967296", "-4294967295", "-4294967296",
    "2147483648", "-2147483649", "18446744073709551615", "18446744073709551616",
    "-18446744073709551615", "99999999999999999999", "nan", "NaN", "-nan", "inf", "-inf",
    "infinity", "1e999", "-1e999", "1e-999", "0.5", "-0.5", "1.5", "1e3", "0x10", "010", " 5",
    "5 ", "", "abc", "1,2", ",", "--", "-", "%s%n", "\u00e9", "1" * 400,
]

STATUS_OK = {0, 1, 2, 3}  # success, error, command-line error, bench refusal / mismatch


class Env:
    def __init__(self, wgllm, src, tmp):
        self.wgllm = wgllm
        # Copies of the fixtures in the temporary directory: a case may name any file as an
        # output (--json, --md), and the source tree must stay untouched whatever the binary does.
        fx = os.path.join(src, "tests", "fixtures")
        self.tmp = tmp
        for p in ("lfm2_tiny/lfm2_tiny.f32.gguf", "qwen35_tiny", "parity/prompt_256.txt"):
            if not os.path.exists(os.path.join(fx, p)):
                sys.exit(f"fixture missing: {os.path.join(fx, p)}")
        fix = os.path.join(tmp, "fixtures")
        os.mkdir(fix)
        self.gguf = shutil.copy(os.path.join(fx, "lfm2_tiny", "lfm2_tiny.f32.gguf"), fix)
        self.hf = shutil.copytree(os.path.join(fx, "qwen35_tiny"), os.path.join(fix, "qwen35_tiny"))  # no chat template
        self.text = shutil.copy(os.path.join(fx, "parity", "prompt_256.txt"), fix)
        self.missing = os.path.join(tmp, "no", "such", "file")
        self.dir = os.path.join(tmp, "a_directory")
        os.mkdir(self.dir)
        self.empty = os.path.join(tmp, "empty.txt")
        open(self.empty, "wb").close()
        self.bad_utf8 = os.path.join(tmp, "bad_utf8.txt")
        with open(self.bad_utf8, "wb") as f:
            f.write(b"ab\xffcd")
        self.garbage = os.path.join(tmp, "garbage.gguf")
        with open(self.garbage, "wb") as f:
            f.write(b"GGUF" + bytes(random.Random(7).randrange(256) for _ in range(4096)))
        self.out = os.path.join(tmp, "out.json")
        self.paths = [self.missing, self.dir, self.empty, self.garbage, "/dev/null", "", self.out, "."]


def specs(e):
    """Per subcommand: (argv prefix, fast valid base arguments, {option: kind}). Kinds: int, real,
    text, path (an input file), model, out (a file written), list (comma-separated ints)."""
    common = {
        "-c": "int", "--context": "int", "--adapter": "int", "-n": "int", "--max-tokens": "int",
        "--temp": "real", "--top-k": "int", "--top-p": "real", "--min-p": "real",
        "--repeat-penalty": "real", "--repeat-last-n": "int", "--seed": "int",
        "--prefill-tokens-per-wg": "int", "--matmul-rows": "int", "--matmul-lanes": "int",
        "--gdn-chunk": "int", "--backend": "text", "-m": "model", "--model": "model",
        "--sparse-block": "int", "--sparse-top-k": "int", "--sparse-window": "int", "--sparse-threshold": "int",
    }
    cpu = ["-m", e.gguf, "--backend", "cpu"]
    return {
        "run": (["run"], cpu + ["-p", "Hi", "-n", "3"],
                dict(common, **{"-p": "text", "-f": "path", "--prompt-file": "path", "-s": "text"})),
        "chat": (["chat"], cpu + ["-n", "2"], dict(common, **{"-s": "text"})),
        "devices": (["devices"], [], {}),
        "models": (["models"], [], {}),
        "tokenize": (["tokenize"], ["-m", e.gguf, "-p", "Hello"], {"-m": "model", "-p": "text"}),
        "perplexity": (["perplexity"], cpu + ["-f", e.text, "--window", "8"],
                       dict(common, **{"-f": "path", "--window": "int", "--json": "out"})),
        "bench": (["bench"], cpu + ["--prompt-lengths", "4", "--gen", "2", "--reps", "1", "--allow-busy"],
                  dict(common, **{"--prompt-lengths": "list", "--gen": "int", "--reps": "int", "--json": "out",
                                  "--md": "out", "--bw-mib": "int", "--planted-slowdown": "real"})),
        "bench ab": (["bench", "ab"],
                     ["--a", "bench synthetic --work 0.01", "--b", "bench synthetic --work 0.01",
                      "--metric", "time_ms", "--rounds", "2"],
                     {"--rounds": "int", "--metric": "text", "--json": "out", "--b-bin": "path",
                      "--a": "abargs", "--b": "abargs"}),
        "bench synthetic": (["bench", "synthetic"], ["--work", "0.01"], {"--work": "work"}),
        "bench multi-turn": (["bench", "multi-turn"],
                             cpu + ["--turns", "2", "--turn-tokens", "4", "--reply-tokens", "2", "--session-only"],
                             dict(common, **{"--turns": "int", "--turn-tokens": "int", "--reply-tokens": "int",
                                             "--json": "out"})),
        "bench long-context": (["bench", "long-context"],
                               cpu + ["--contexts", "6", "--sparse-threshold", "4", "--sparse-block", "2"],
                               dict(common, **{"--contexts": "list", "--json": "out"})),
        "bench attention": (["bench", "attention"],
                            ["--tokens", "2", "--cache", "3", "--heads", "2", "--kv-heads", "1", "--head-dim", "8",
                             "--reps", "1", "--split-targets", "4"],
                            {"--adapter": "int", "--tokens": "int", "--cache": "int", "--heads": "int",
                             "--kv-heads": "int", "--head-dim": "int", "--reps": "int", "--split-targets": "list",
                             "--json": "out"}),
    }


def values(kind, e, rng):
    """Boundary values of a kind, plus a few random ones."""
    if kind == "out":  # (never an input file of another case: cases run concurrently)
        return [e.missing, e.dir, "", "/dev/null", ".", e.out, os.path.join(e.tmp, "out.md")]
    if kind in ("path", "model"):
        return e.paths + [e.text if kind == "path" else e.gguf]
    if kind == "abargs":  # arguments of the A/B child process: safe words only (a shell runs them)
        return ["", "bench synthetic --work 0", "bench --reps 0", "bench synthetic --work nan", "devices --bogus",
                "no-such-command", "bench synthetic --constant --work 0"]
    vals = list(BOUNDARY)
    if kind == "work":  # millions of iterations, up to 10000 valid: only small valid values here
        return [v for v in vals if v != "1e3"] + ["0.001", "-0.001"]
    if kind == "real":
        vals += [repr(rng.uniform(-2, 2)), repr(rng.uniform(-1e6, 1e6)), "1e-7", "0.999999"]
    elif kind == "list":
        vals += ["4,0", "4,,4", "0,4294967296", "4,-1", "1,2,3", ",4"]
    return vals


def random_value(rng):
    r = rng.random()
    if r < 0.4:
        return rng.choice(BOUNDARY)
    if r < 0.6:
        return str(rng.randint(-(1 << 70), 1 << 70))
    if r < 0.75:
        return repr(rng.uniform(-1e300, 1e300) * rng.choice([1, 1e-300]))
    return "".join(chr(rng.randrange(32, 127)) for _ in range(rng.randrange(0, 12)))


class Case:
    def __init__(self, argv, name, expect_status=None, expect_stderr=None, expect_stdout=None, loads=False):
        self.argv, self.name = argv, name
        self.expect_status, self.expect_stderr, self.expect_stdout = expect_status, expect_stderr, expect_stdout
        self.loads = loads


def pinned_cases(e):
    tiny = ["-m", e.gguf, "--backend", "cpu"]
    bench = ["bench"] + tiny + ["--prompt-lengths", "4", "--allow-busy"]
    attn = ["bench", "attention", "--heads", "2", "--kv-heads", "1", "--head-dim", "8", "--reps", "1"]
    usage = 2
    return [
        Case(bench + ["--gen", "2", "--reps", "0"], "bench --reps 0 (was SIGSEGV)", {usage}, "--reps"),
        Case(bench + ["--reps", "1", "--gen", "0"], "bench --gen 0 (was garbage decode tok/s)", {usage}, "--gen"),
        Case(bench + ["--reps", "1", "--gen", "1"], "bench --gen 1 (was garbage decode tok/s)", {usage}, "--gen"),
        Case(["bench", "attention", "--kv-heads", "0"], "bench attention --kv-heads 0 (was SIGFPE)", {usage}, "--kv-heads"),
        Case(["bench", "attention", "--tokens", "0", "--cache", "0"], "bench attention --tokens 0 --cache 0", {usage},
             "--tokens"),
        Case(["bench", "attention", "--heads", "9", "--kv-heads", "2"], "heads not a multiple of kv-heads", {usage},
             "multiple of --kv-heads"),
        Case(["bench", "attention", "--head-dim", "6"], "head dim not a multiple of 4", {usage}, "multiple of 4"),
        Case(["run", "-p", "x", "-c", "99999999999999999999"], "overflowing -c", {usage}, "--context"),
        Case(["run", "-p", "x", "--top-k", "-1"], "negative into unsigned --top-k", {usage}, "--top-k"),
        Case(["run", "-p", "x", "--seed", "-1"], "negative into uint64 --seed", {usage}, "--seed"),
        Case(["run", "-p", "x", "-n", "-18446744073709551615"], "wrapping negative -n", {usage}, "--max-tokens"),
        Case(["run", "-p", "x", "--temp", "nan"], "NaN --temp", {usage}, "--temp"),
        Case(["run", "-p", "x", "--top-p", "inf"], "inf --top-p", {usage}, "--top-p"),
        Case(["run", "-p", "x", "--min-p", "-nan"], "NaN --min-p", {usage}, "--min-p"),
        Case(["run", "-p", "x", "--repeat-penalty", "0"], "zero --repeat-penalty", {usage}, "--repeat-penalty"),
        Case(["run", "-p", "x", "--matmul-lanes", "3"], "--matmul-lanes not a power of two", {usage}, "power of two"),
        Case(["run", "-p", "x", "--matvec-lanes", "7"], "--matvec-lanes not a power of two", {usage}, "power of two"),
        Case(["run", "-p", "x", "--matvec-rows-per-thread", "3"], "--matvec-rows-per-thread 3", {usage}, "power of two"),
        Case(["run", "-p", "x", "--matmul-reg-n", "5"], "--matmul-reg-n 5", {usage}, "[4, 8]"),
        Case(["run", "-p", "x", "--matmul-reg-t", "2"], "--matmul-reg-t 2", {usage}, "[4, 8]"),
        Case(["run", "-p", "x", "-m", e.missing], "missing model", {usage}, "no such file"),
        Case(["run", "-f", e.dir], "directory as prompt file", {usage}, "--prompt-file"),
        Case(["perplexity", "-f", e.text, "--window", "1"], "perplexity --window 1", {usage}, "--window"),
        Case(["bench", "--json", e.dir], "directory as --json output", {usage}, "directory"),
        Case(["bench", "ab", "--metric", "t", "--rounds", "1"], "bench ab --rounds 1", {usage}, "--rounds"),
        Case(["bench", "synthetic", "--work", "inf"], "bench synthetic --work inf", {usage}, "--work"),
        Case(["bench", "multi-turn", "--turns", "0"], "bench multi-turn --turns 0", {usage}, "--turns"),
        Case(["run", "-p", "x", "--fuse-norm=maybe"], "--switch=VALUE not a truth value (was an uncaught exception "
             "once flag functions took values)", {usage}, "--fuse-norm: maybe not in"),
        Case(["frobnicate"], "unknown command", {usage}, "unknown command 'frobnicate'.*commands: run, chat"),
        Case(["bnech"], "misspelt command", {usage}, "did you mean 'bench'"),
        Case(["bench", "atention"], "misspelt bench command", {usage}, "did you mean 'attention'"),
        Case(["run", "--tmep", "1"], "misspelt option", {usage}, "did you mean '--temp'"),
        Case([], "no command: usage", {usage}, "Usage"),
        Case(["--help"], "--help", {0}, None, "Subcommands"),
        Case(["bench", "attention", "--help"], "bench attention --help", {0}, None, "--kv-heads"),
        Case(attn + ["--tokens", "1", "--cache", "0"], "bench attention, one token, empty cache", {0, 1}, None,
             None, loads=True),
        Case(bench + ["--gen", "2", "--reps", "1"], "bench, smallest valid run", {0}, None, "configuration", loads=True),
        # bench ab reads the last line: every prompt length's figures are there (ttft_ms_p<P>).
        Case(["bench"] + tiny + ["--prompt-lengths", "4,6", "--allow-busy", "--gen", "2", "--reps", "1"],
             "bench, two prompt lengths: per-length keys", {0}, None, r'"ttft_ms_p6":[0-9.e+-]+', loads=True),
        # On/off switches read a value: `--f=false` turns an on-by-default switch off, `--no-f=false` on, and
        # the last of `--f --no-f` wins (bench's non_product_flags lists the switches off their defaults).
        Case(bench + ["--gen", "2", "--reps", "1", "--fuse-norm=false", "--shader-checks=on", "--json", "/dev/stdout"],
             "--f=false / --f=on set the switch (was a silent no-op)", {0}, None,
             r'"non_product_flags": \[\s*"--backend cpu",\s*"--shader-checks",\s*"--no-fuse-norm"\s*\]', loads=True),
        Case(bench + ["--gen", "2", "--reps", "1", "--no-shader-checks=false", "--json", "/dev/stdout"],
             "--no-f=false turns an off-by-default switch on (was a silent no-op)", {0}, None,
             r'"non_product_flags": \[\s*"--backend cpu",\s*"--shader-checks"\s*\]', loads=True),
        Case(bench + ["--gen", "2", "--reps", "1", "--shader-checks", "--no-shader-checks", "--json", "/dev/stdout"],
             "the last of --f --no-f wins", {0}, None, r'"non_product_flags": \[\s*"--backend cpu"\s*\]', loads=True),
        Case(["tokenize", "-m", e.gguf, "-p", ""], "tokenize an empty text", {0}, None, r"\[", loads=True),
        Case(["run"] + tiny + ["-f", e.empty, "--raw", "-n", "2"], "empty prompt file, raw", {0, 1}, None, None,
             loads=True),
        Case(["run"] + tiny + ["-p", "Hi", "-n", "0"], "run -n 0", {0}, None, None, loads=True),
        Case(["run"] + tiny + ["-f", e.empty, "-n", "2"], "empty prompt file (as -p \"\")", {1}, "is empty", loads=True),
        Case(["run"] + tiny + ["-f", e.bad_utf8, "-n", "2"], "invalid UTF-8 prompt file: the offset in the file (was the "
             "templated text's)", {1}, "byte offset 2", loads=True),
        Case(["chat", "-m", e.hf, "--backend", "cpu"], "chat with a model without a chat template", {1},
             "chat template", loads=True),
        Case(["run", "-m", e.garbage, "--backend", "cpu", "-p", "x"], "garbage model file", {1}, "error", loads=True),
        Case(["run", "-m", e.gguf, "--backend", "webgpu", "--no-warmup", "-p", "x", "-n", "1", "--matmul-rows", "1024",
              "--matmul-lanes", "1024"], "webgpu: matmul workgroup over the device limit", {1}, "error", loads=True),
        Case(["bench", "multi-turn"] + tiny + ["--turns", "2", "--turn-tokens", "4", "--reply-tokens", "1", "-c", "4"],
             "bench multi-turn: no turn fits the context", {1}, "raise --context", loads=True),
        Case(["run"] + tiny + ["-p", "Hi", "-c", "4"], "run: prompt longer than the context", {1}, "raise --context",
             loads=True),
        Case(["run", "-m", e.dir, "--backend", "cpu", "-p", "x"], "directory without a model", {1}, "error",
             loads=True),
        Case(["perplexity"] + tiny + ["-f", e.text, "--window", "16", "--json", "/proc/version"],
             "a --json that cannot be written is an error (was exit 0, nothing written)", {1}, "cannot write",
             loads=True),
        Case(["bench", "matmul", "--shapes", "4294967295:4294967295", "--reps", "1"],
             "bench matmul: huge shape (was internal error, exit 70)", {1}, "65536"),
        Case(["bench", "matmul", "--tiles", "0x0/0x0", "--reps", "1"], "bench matmul: empty tile", {1}, "BN and BT"),
        Case(["bench", "matmul", "--peak-tflops", "nan"], "bench matmul: NaN peak", {usage}, "--peak-tflops"),
    ]


ALIASES = [{"-n", "--max-tokens"}, {"-c", "--context"}, {"-m", "--model"}, {"-f", "--prompt-file", "--file"},
           {"-p", "--prompt"}, {"-s", "--system"}]


def without(base, opt):
    """base without opt (and its other spellings) and its value: so the mutated value is the one
    parsed, not refused as a repeated option."""
    names = next((g for g in ALIASES if opt in g), {opt})
    out, i = [], 0
    while i < len(base):
        if base[i] in names:
            i += 2
            continue
        out.append(base[i])
        i += 1
    return out


def generated_cases(e, rng, n_random, n_combos):
    """Every option of every subcommand with every boundary value (on top of the fast base args,
    so an accepted value runs a tiny model), then random multi-option mutations and unknown flags."""
    cases = []
    sp = specs(e)
    common = set(sp["run"][2]) - {"-p", "-f", "--prompt-file", "-s"}
    for name, (prefix, base, opts) in sp.items():
        cases.append(Case(prefix + base, f"{name}: base", {0, 1}, loads=True))
        cases.append(Case(prefix + base + ["--no-such-flag"], f"{name}: unknown flag", {2}))
        cases.append(Case(prefix + base + ["stray"], f"{name}: stray positional", {2}))
        for opt, kind in opts.items():
            cases.append(Case(prefix + without(base, opt) + [opt], f"{name}: {opt} without a value", {2}))
            vals = values(kind, e, rng)
            # The options every model subcommand shares get all values on `run`, a sample elsewhere.
            if name != "run" and opt in common:
                vals = rng.sample(vals, 3)
            rest = without(base, opt)
            for v in vals:
                if opt.startswith("--") and rng.random() < 0.2:  # the --opt=value spelling, sometimes
                    cases.append(Case(prefix + rest + [f"{opt}={v}"], f"{name}: {opt}={v!r}", None, loads=True))
                else:
                    cases.append(Case(prefix + rest + [opt, v], f"{name}: {opt} {v!r}", None, loads=True))
            if opt in base and kind != "list" and opt != "--metric":  # given twice: a command-line error naming the option
                cases.append(Case(prefix + base + [opt, base[base.index(opt) + 1]], f"{name}: {opt} twice", {2},
                                  opt.lstrip("-")))
    names = list(sp)
    for i in range(n_random):
        name = rng.choice(names)
        prefix, base, opts = sp[name]
        argv = list(prefix)
        # Random options with random values, then a missing model so nothing slow runs when all
        # values happen to be valid (the model path is checked last, at load or at parse).
        keys = list(opts) + ["--bogus", "-z", "--"]
        for _ in range(rng.randrange(1, 5)):
            argv += [rng.choice(keys), random_value(rng)]
        if "-m" in opts:
            argv += ["-m", rng.choice([e.missing, e.dir, e.garbage, e.empty])]
        elif name in ("bench synthetic", "bench attention", "bench ab", "devices"):
            argv += ["--bogus-guard"]  # never runs the workload: an unknown flag is always refused
        cases.append(Case(argv, f"random {i}: {name}"))
    # Random combinations of boundary values on the tiny model (unguarded: a valid combination
    # runs). Safe for time: every value in values() that passes validation is small for a size.
    for i in range(n_combos):
        name = rng.choice(names)
        prefix, base, opts = sp[name]
        argv = list(base)
        for opt in rng.sample(sorted(opts), min(len(opts), rng.randrange(2, 5))):
            argv = without(argv, opt) + [opt, rng.choice(values(opts[opt], e, rng))]
        cases.append(Case(prefix + argv, f"combination {i}: {name}", loads=True))
    # Unknown and misspelt subcommands at every level.
    for w in ["", "x", "runn", "Bench", "bench bench", "-", "--", "-1", "nan", "devices devices"]:
        cases.append(Case(w.split(" ") if w else [""], f"command {w!r}"))
    return cases


def run_case(e, c, timeout):
    import re
    t0 = time.monotonic()
    try:
        p = subprocess.run([e.wgllm] + c.argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                           cwd=e.tmp)
    except subprocess.TimeoutExpired:
        return f"TIMEOUT after {timeout} s"
    dt = time.monotonic() - t0
    out = p.stdout.decode("utf-8", "replace")
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0:
        sig = -p.returncode
        try:
            sname = signal.Signals(sig).name
        except ValueError:
            sname = str(sig)
        return f"killed by {sname}; stderr tail: {err[-300:]!r}"
    if p.returncode not in STATUS_OK:
        return f"exit status {p.returncode} (not one of {sorted(STATUS_OK)}); stderr tail: {err[-300:]!r}"
    lines = [l for l in err.splitlines() if l.strip()]
    if p.returncode == 2 and c.argv and len(lines) != 1 and "Usage" not in err:
        return f"a command-line error must be one line on stderr, got {len(lines)}: {err[-400:]!r}"
    if p.returncode in (1, 2) and c.argv and not lines:
        return "error status with an empty stderr"
    if c.expect_status is not None and p.returncode not in c.expect_status:
        return f"exit status {p.returncode}, expected {sorted(c.expect_status)}; stderr: {err[-400:]!r}"
    if c.expect_stderr and not re.search(c.expect_stderr, err):
        return f"stderr does not match {c.expect_stderr!r}: {err[-400:]!r}"
    if c.expect_stdout and not re.search(c.expect_stdout, out):
        return f"stdout does not match {c.expect_stdout!r}: {out[-400:]!r}"
    return None, dt, p.returncode, (lines[-1] if lines else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wgllm")
    ap.add_argument("source_dir")
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--random-cases", type=int, default=300, help="random arguments, refused before a model loads")
    ap.add_argument("--combinations", type=int, default=80, help="random combinations of boundary values that may run")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per process")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--pinned-only", action="store_true")
    ap.add_argument("--verbose", action="store_true", help="print every case's status and last stderr line")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp(prefix="wgllm_cli_fuzz_")
    try:
        e = Env(os.path.abspath(a.wgllm), os.path.abspath(a.source_dir), tmp)
        cases = pinned_cases(e) + ([] if a.pinned_only else generated_cases(e, rng, a.random_cases, a.combinations))
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=a.jobs) as pool:
            results = list(pool.map(lambda c: run_case(e, c, a.timeout), cases))
        failures, by_status, slow, busy = [], {}, [], {}
        for c, r in zip(cases, results):
            if isinstance(r, str):
                failures.append((c, r))
                continue
            _, dt, rc, last = r
            if a.verbose:
                print(f"[{rc}] {c.name}: {last}")
            by_status[rc] = by_status.get(rc, 0) + 1
            slow.append((dt, c.name))
            busy[c.argv[0] if c.argv else ""] = busy.get(c.argv[0] if c.argv else "", 0) + dt
        slow.sort(reverse=True)
        print(f"{len(cases)} cases in {time.monotonic() - t0:.1f} s: exit status counts {dict(sorted(by_status.items()))}; "
              f"slowest: " + ", ".join(f"{n} {dt:.2f} s" for dt, n in slow[:3]))
        print("process seconds by command: " + ", ".join(f"{k or '-'} {v:.1f}" for k, v in sorted(busy.items())))
        for c, why in failures:
            print(f"FAIL [{c.name}] wgllm {' '.join(repr(x) if (not x or ' ' in x) else x for x in c.argv)}\n    {why}")
        if failures:
            print(f"{len(failures)} of {len(cases)} cases failed")
            return 1
        print("all cases exited cleanly")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
