#!/usr/bin/env python3
"""Extracts a GGUF file's header (every metadata key and value, tokenizer arrays included, and the
tensor table: names, shapes, types, offsets; the alignment) into a small gzip file, so a model's
exact shapes reach another machine without its weights; tools/synth/write_gguf.py --header writes a
full-size file with random weights from it.

The extract is the file's bytes before the tensor data section (magic .. tensor infos .. padding),
gzip-compressed: nothing is re-encoded, so types and values are exactly the original's (checked
after writing by parsing it back). Standard library only.

Usage: gguf_header.py MODEL.gguf OUT.hdr.gz           extract
       gguf_header.py --dump FILE [--tensors]          summary (FILE: a .gguf or an extract)
       gguf_header.py --compare A B                    exit 1 unless A and B have the same tensor
                                                       table (names, shapes, types, offsets) and
                                                       alignment (A, B: .gguf files or extracts)
"""
import gzip, os, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_io as g  # noqa: E402


def extract(src, dst):
    with open(src, "rb") as f:
        h, data_start = g.read_header(f)
        f.seek(0)
        raw = f.read(data_start)
    with gzip.open(dst + ".tmp", "wb", compresslevel=9) as o:
        o.write(raw)
    back = g.load_header(dst + ".tmp")
    if [t.key() for t in back.tensors] != [t.key() for t in h.tensors] or back.kv != h.kv:
        os.remove(dst + ".tmp")
        raise SystemExit("gguf_header: the extract does not parse back to the same header")
    os.replace(dst + ".tmp", dst)
    print(f"{dst}: {len(h.kv)} metadata keys, {len(h.tensors)} tensors, header {len(raw)} bytes "
          f"-> {os.path.getsize(dst)} bytes gzip (architecture {h.get('general.architecture')}, "
          f"data {sum(t.nbytes for t in h.tensors) / 2**20:.1f} MiB)")


def dump(path, tensors):
    h = g.load_header(path)
    for k, (t, v) in h.kv.items():
        if t == g.ARRAY:
            et, items = v
            s = f"array[{len(items)}] {items[:4]}{' ...' if len(items) > 4 else ''}"
        else:
            s = repr(v)
            s = s if len(s) < 100 else s[:97] + "..."
        print(f"{k} = {s}")
    counts = {}
    for t in h.tensors:
        counts[g.GGML_TYPES[t.type][0]] = counts.get(g.GGML_TYPES[t.type][0], 0) + 1
    print(f"{len(h.tensors)} tensors {counts}, alignment {h.alignment}, "
          f"data {sum(t.nbytes for t in h.tensors)} bytes")
    if tensors:
        for t in h.tensors:
            print(f"  {t.name:40s} {g.GGML_TYPES[t.type][0]:6s} {t.shape} @ {t.offset}")


def compare(a, b):
    ha, hb = g.load_header(a), g.load_header(b)
    ta, tb = [t.key() for t in ha.tensors], [t.key() for t in hb.tensors]
    if ta == tb and ha.alignment == hb.alignment:
        print(f"same tensor table: {len(ta)} tensors, alignment {ha.alignment}")
        return 0
    for x, y in zip(ta, tb):
        if x != y:
            print(f"first difference: {x} vs {y}")
            break
    print(f"tensor tables differ ({len(ta)} vs {len(tb)} tensors, alignment {ha.alignment} vs {hb.alignment})")
    return 1


def main():
    a = sys.argv[1:]
    if len(a) >= 2 and a[0] == "--dump":
        dump(a[1], "--tensors" in a)
    elif len(a) == 3 and a[0] == "--compare":
        sys.exit(compare(a[1], a[2]))
    elif len(a) == 2 and not a[0].startswith("-"):
        extract(a[0], a[1])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
