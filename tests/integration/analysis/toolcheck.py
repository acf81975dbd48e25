"""What the analysis and report integration checks share (stdlib only): finding the tool a check
needs, running memtap, and skipping on missing tools or test data (exit 77), except under CI=true,
where those fail."""
import os
import shutil
import subprocess
import sys

SKIP = 77


def skip(msg):
    """Skips the test (exit 77) for `msg`; under CI=true fails instead."""
    if os.environ.get("CI") == "true":
        sys.exit("FAIL: " + msg)
    print("SKIP: " + msg)
    sys.exit(SKIP)


def need(tool, package):
    """The tool's path; a missing tool skips."""
    path = shutil.which(tool)
    if not path:
        skip(f"{tool} not found (Debian package {package}; scripts/install-deps.sh installs it)")
    return path


def need_files(paths):
    """Skips unless every test data file exists."""
    for p in paths:
        if not os.path.exists(p):
            skip(f"missing test data {p}")


def run(args, **kw):
    """A command's standard output; a nonzero exit fails with its standard error."""
    p = subprocess.run(args, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(args)} exited {p.returncode}\n{p.stderr}")
    return p.stdout
