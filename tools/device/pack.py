#!/usr/bin/env python3
"""Stages what a device run needs into .carry/ and plans the calls that carry it.

The device tool sends the repository's working tree plus at most 8 ignored `carry` paths, 64 MiB in
all per call (see /work/.library/device/README.md). Models and binaries are larger than what one
call has left after the tree, so this script:
  1. copies the chosen binaries (stripped) and the shared libraries they need that a stock Ubuntu
     24.04 image may lack into .carry/bin/ (glibc, libstdc++, libgcc stay the device's own);
  2. optionally adds the Vulkan loader .debs (.gl/, fetched with apt-get download) and the llama.cpp
     source from the llama-cpp-python sdist (.carry/llama.cpp.tgz);
  3. splits each model into slices (.carry/<name>.partNN) so that every call fits the budget;
  4. writes .carry/plan.json: the calls in order, each with its carry list, and the sha256 of every
     model, which tools/device/remote.sh checks after joining the slices on the device.

Usage: python3 tools/device/pack.py [--bin wgllm kernels_test /path/to/other=wgllm-base ...]
                                     [--extra ~/.cache/wgllm/text=text ...] [--model PATH ...] [--gl]
                                     [--llamacpp] [--build build] [--margin-mib 3]
Then issue the calls printed, back to back (the machine is released after ~30 s idle); each
recipe starts with `source tools/device/remote.sh`, which stores the carried pieces in /root/wg.
"""
import argparse, hashlib, json, os, shutil, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CARRY = os.path.join(ROOT, ".carry")
MiB = 1 << 20
LIMIT = 64 * MiB
# Libraries every Ubuntu 24.04 image has in a newer version than Debian 12's (keep the device's).
SYSTEM = ("libc.so", "libm.so", "libdl.so", "libpthread.so", "librt.so", "ld-linux", "libstdc++.so",
          "libgcc_s.so", "linux-vdso", "libpcre2-8.so")


def tree_bytes(lean=False):
    """Bytes of the working tree the device tool sends (tracked + untracked, not ignored); with lean,
    without the files tools/device/lean_tree.sh takes out of it for staging calls."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    gone = set()
    if lean:
        gone = set(subprocess.run([os.path.join(ROOT, "tools/device/lean_tree.sh"), "list"], cwd=ROOT,
                                  capture_output=True, text=True, check=True).stdout.split())
    return sum(os.path.getsize(os.path.join(ROOT, p.decode())) for p in out
               if p and p.decode() not in gone and os.path.isfile(os.path.join(ROOT, p.decode())))


def du(path):
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 22), b""):
            h.update(b)
    return h.hexdigest()


def stage_bins(build, names):
    dst = os.path.join(CARRY, "bin")
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    libs = set()
    for n in names:
        if "=" in n:  # PATH=NAME: an explicit file (e.g. a baseline build) carried under NAME
            path, n = n.split("=", 1)
            exe = [os.path.abspath(path)]
        else:
            hits = [os.path.join(d, n) for d, _, fs in os.walk(os.path.join(ROOT, build)) if n in fs]
            exe = [h for h in hits if os.access(h, os.X_OK) and os.path.isfile(h)]
        if not exe:
            sys.exit(f"pack: no built binary named {n} under {build}/ (run the build first)")
        shutil.copy2(exe[0], os.path.join(dst, n))
        subprocess.run(["strip", os.path.join(dst, n)], check=True)
        for line in subprocess.run(["ldd", exe[0]], capture_output=True, text=True).stdout.splitlines():
            parts = line.split("=>")
            if len(parts) == 2 and parts[1].strip().startswith("/"):
                lib = parts[1].split()[0]
                if not any(s in os.path.basename(lib) for s in SYSTEM):
                    libs.add(lib)
    for lib in libs:
        shutil.copy2(os.path.realpath(lib), os.path.join(dst, os.path.basename(lib)))
    return "bin"


def stage_gl():
    gl = os.path.join(ROOT, ".gl")
    if os.path.isdir(gl) and any(f.endswith(".deb") for f in os.listdir(gl)):
        return
    os.makedirs(gl, exist_ok=True)
    os.makedirs("/tmp/amd64/partial", exist_ok=True)
    o = ["-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64", "-oDir::State::Lists=/tmp/amd64"]
    subprocess.run(["apt-get", *o, "update"], check=True, capture_output=True)
    # The NVIDIA Vulkan ICD lives in libGLX_nvidia, which needs the GL vendor-neutral dispatch
    # libraries too (the list in /work/.library/device/README.md).
    subprocess.run(["apt-get", *o, "download", "libvulkan1", "libegl1", "libglvnd0", "libopengl0", "libgl1",
                    "libglx0", "libgles2"], cwd=gl, check=True)


def stage_llamacpp():
    dst = os.path.join(CARRY, "llama.cpp.tgz")
    if os.path.isfile(dst):
        return
    tmp = "/tmp/wgllm-sdist"
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary=:all:", "-d", tmp,
                    "llama-cpp-python==0.3.36"], check=True)
    sd = [f for f in os.listdir(tmp) if f.startswith("llama_cpp_python-0.3.36")][0]
    subprocess.run(f"cd {tmp} && rm -rf x && mkdir x && tar xzf {sd} -C x && "
                   f"tar czf {dst} --exclude='llama.cpp/models/*.gguf' --exclude=llama.cpp/docs --exclude=llama.cpp/media "
                   f"-C x/llama_cpp_python-0.3.36/vendor llama.cpp", shell=True, check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", nargs="*", default=["wgllm"])
    ap.add_argument("--model", nargs="*", default=[])
    ap.add_argument("--gl", action="store_true", help="Vulkan loader .debs in .gl/")
    ap.add_argument("--llamacpp", action="store_true", help="llama.cpp source from the sdist")
    ap.add_argument("--extra", nargs="*", default=[], help="SRC=NAME: copy a file or folder to .carry/NAME and carry it")
    ap.add_argument("--build", default="build")
    ap.add_argument("--margin-mib", type=float, default=3)
    ap.add_argument("--lean", action="store_true",
                    help="plan for calls made with tools/device/lean_tree.sh on (the tree without results and fixtures)")
    a = ap.parse_args()
    os.makedirs(CARRY, exist_ok=True)
    for f in os.listdir(CARRY):
        if ".part" in f and not f.startswith("llama-vk"):
            os.remove(os.path.join(CARRY, f))
    items = []  # (carry path relative to the repo, bytes)
    if a.bin:
        stage_bins(a.build, a.bin)
        items.append((".carry/bin", du(os.path.join(CARRY, "bin"))))
    if a.gl:
        stage_gl()
        items.append((".gl", du(os.path.join(ROOT, ".gl"))))
    if a.llamacpp:
        stage_llamacpp()
        items.append((".carry/llama.cpp.tgz", du(os.path.join(CARRY, "llama.cpp.tgz"))))
    for e in a.extra:
        src, _, name = e.partition("=")
        dst = os.path.join(CARRY, name or os.path.basename(src))
        shutil.rmtree(dst, ignore_errors=True)
        (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, dst)
        items.append((".carry/" + os.path.basename(dst), du(dst)))
    budget = LIMIT - tree_bytes(a.lean) - int(a.margin_mib * MiB)
    if any(s > budget for _, s in items):
        sys.exit(f"pack: an item exceeds the per-call budget of {budget / MiB:.1f} MiB")
    # First fit: each item goes into the first call with room for it; model slices then fill the room
    # left in every call, in order, before new calls are opened (a call carries at most 8 paths,
    # one of them .carry/models.sha256).
    calls = []  # [paths, bytes left]
    for path, size in items:
        call = next((c for c in calls if c[1] >= size and len(c[0]) < 7), None)
        if call is None:
            call = [[], budget]
            calls.append(call)
        call[0].append(path); call[1] -= size
    models = []
    for m in a.model:
        name = os.path.basename(m)
        total, off, k = os.path.getsize(m), 0, 0
        with open(m, "rb") as f:
            while off < total:
                call = next((c for c in calls if c[1] >= MiB and len(c[0]) < 7), None)
                if call is None:
                    call = [[], budget]
                    calls.append(call)
                n = min(call[1], total - off)
                part = f"{name}.part{k:02d}"
                with open(os.path.join(CARRY, part), "wb") as o:
                    o.write(f.read(n))
                call[0].append(".carry/" + part); call[1] -= n; off += n; k += 1
        models.append({"name": name, "parts": k, "sha256": sha256(m), "bytes": total})
    calls = [c[0] for c in calls]
    plan = {"budget_bytes": budget, "calls": calls, "models": models}
    with open(os.path.join(CARRY, "plan.json"), "w") as f:
        json.dump(plan, f, indent=1)
    # remote.sh reads the models' checksums from this file, which travels with the tree.
    with open(os.path.join(CARRY, "models.sha256"), "w") as f:
        for m in models:
            f.write(f"{m['sha256']}  {m['name']} {m['parts']}\n")
    print(f"per-call budget {budget / MiB:.1f} MiB; {len(calls)} calls:")
    for i, c in enumerate(calls):
        print(f"  call {i + 1}: carry {json.dumps(c + ['.carry/models.sha256'])}")


if __name__ == "__main__":
    main()
