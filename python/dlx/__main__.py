"""python -m dlx: the command-line front."""
import sys

from . import include_dir


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--include-dir"]:
        print(include_dir())
        return 0
    print("usage: python -m dlx --include-dir", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
