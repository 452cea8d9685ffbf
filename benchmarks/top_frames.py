"""The top entries of a py-spy profile in collapsed-stack form (``py-spy record --format raw``).

    python benchmarks/top_frames.py PROFILE.txt [--top 25] [--group]

Each input line is one stack, outermost frame first, frames ``function (file:line)`` joined by ``;``,
then a space and its sample count.  Prints the samples, then the functions by their own samples
(the innermost frame: where the CPU was spent) and by their inclusive samples (anywhere on the
stack), each as a share of all samples.  ``--group`` adds the samples by library (the first path
part of the innermost frame's file: ``httpcore``, ``h11``, ``asyncio``, ``services`` ...).
``benchmarks/prober_bench.py --profile DIR`` writes such files.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^():]*?)(?::(?P<line>\d+))?\)$")


def read(path: Path) -> list[tuple[list[str], int]]:
    """The stacks of ``path``: (frames outermost first, samples)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            out.append((stack.split(";"), int(count)))
    return out


def name(frame: str) -> str:
    """``function (file)`` without the line number, so one function's lines add up."""
    m = _FRAME.match(frame)
    return f"{m['func']} ({m['file']})" if m else frame


def library(frame: str) -> str:
    m = _FRAME.match(frame)
    return m["file"].split("/")[0] if m else frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--group", action="store_true")
    args = parser.parse_args()
    stacks = [s for p in args.profile for s in read(p)]
    total = sum(n for _, n in stacks)
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    libs: Counter[str] = Counter()
    for frames, n in stacks:
        own[name(frames[-1])] += n
        libs[library(frames[-1])] += n
        for f in set(map(name, frames)):
            inclusive[f] += n
    print(f"{total} samples ({', '.join(str(p) for p in args.profile)})")
    print(f"\nown samples (innermost frame), top {args.top}:")
    for f, n in own.most_common(args.top):
        print(f"{100 * n / total:6.1f} %  {n:>6}  {f}")
    print(f"\ninclusive samples (anywhere on the stack), top {args.top}:")
    for f, n in inclusive.most_common(args.top):
        print(f"{100 * n / total:6.1f} %  {n:>6}  {f}")
    if args.group:
        print("\nown samples by library:")
        for f, n in libs.most_common():
            print(f"{100 * n / total:6.1f} %  {n:>6}  {f}")


if __name__ == "__main__":
    main()
