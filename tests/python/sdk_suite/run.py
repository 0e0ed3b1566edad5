"""Microsoft's own emulator tests for the Python SDK (azure-cosmos 4.17.1) against `partita serve`.

Usage:
  python run.py [--endpoint URL | --partita BIN] [--out DIR] [--ceiling-minutes M] [--passed FILE]
                [--fetch-only] [TEST ...]

TEST is a file of the suite (test_ttl.py), a pytest node id (test_ttl.py::TestTimeToLive::test_x),
or @LIST, a file naming one TEST per line (lines starting with # are comments). Without TEST, the files in emulator_files.txt
run: the full measurement. Without --endpoint, the script starts `BIN --in-memory serve --tls` on a
free port (BIN: target/release/partita, else target/debug/partita) and stops it at the end.

Prints a per-file tally (passed, failed, errored, skipped), the total with its percentage, and the
first line of each failure; exits non-zero when any selected test fails or errors, or none ran.

The suite is the `tests/` folder of the source distribution, downloaded once into
target/sdk-suite/ (never vendored into this repository). Adaptations, none of which changes what a
test asserts:
  1. `devtools_testutils` (the Azure SDK repository's test helpers, not on PyPI) is replaced by
     the stub in devtools_testutils/; with the emulator's master key it is never asked for a
     credential.
  2. test_config.py recognises the emulator only at exactly https://localhost:8081/; its
     `local_host` is read from ACCOUNT_HOST instead, so the suite treats a server on any port
     as the emulator (key auth, emulator-only tests enabled).
  3. partita_plugin.py: a shared container the session cannot create is reported instead of
     aborting the session (see there).
  4. pytest-timeout bounds each test (--timeout, 300 s by default), so a hang costs one test.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

VERSION = "4.17.1"
HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
CACHE = ROOT / "target" / "sdk-suite"
SUITE = CACHE / f"azure_cosmos-{VERSION}" / "tests"
EMULATOR_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
# What the suite imports besides the SDK, pinned so a run today and a run next month agree.
REQUIREMENTS = ["pytest==9.2.0", "pytest-asyncio==1.5.0", "pytest-timeout==2.4.0", "aiohttp==3.14.5"]
LOCAL_HOST = "    local_host = 'https://localhost:8081/'\n"


def fetch():
    """Downloads and unpacks the suite once, with the adaptations applied."""
    config = SUITE / "test_config.py"
    if config.exists() and LOCAL_HOST not in config.read_text():
        return
    CACHE.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps"]
    subprocess.run([*pip, "-d", str(CACHE), f"azure-cosmos=={VERSION}"], check=True)
    with tarfile.open(CACHE / f"azure_cosmos-{VERSION}.tar.gz") as sdist:
        sdist.extractall(CACHE, filter="data")
    text = config.read_text()
    assert LOCAL_HOST in text, "test_config.py changed: adaptation 2 needs a new anchor"
    adapted = "    local_host = os.getenv('ACCOUNT_HOST', 'https://localhost:8081/')\n"
    config.write_text(text.replace(LOCAL_HOST, adapted))


def install():
    """Installs the suite's test dependencies into this interpreter's environment when missing."""
    probe = "import pytest, pytest_asyncio, pytest_timeout, aiohttp, azure.cosmos"
    if subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode != 0:
        pins = [f"azure-cosmos=={VERSION}", *REQUIREMENTS]
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *pins], check=True)


def selection(tests):
    """The node ids to run: TEST arguments with @LIST files expanded, or the emulator files."""
    tests = tests or [f"@{HERE / 'emulator_files.txt'}"]
    out = []
    for test in tests:
        if test.startswith("@"):
            lines = Path(test[1:]).read_text().splitlines()
            # Whole-line comments only: parametrized node ids may hold a '#'.
            out += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
        else:
            out.append(test)
    return out


def start_server(binary):
    """Starts `partita --in-memory serve --tls` on a free port; returns the process and its port."""
    args = [binary, "--in-memory", "serve", "--tls", "--bind", "127.0.0.1:0"]
    server = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    ready = json.loads(server.stdout.readline())
    return server, ready["endpoint"].rstrip("/").rsplit(":", 1)[1]


def node_id(case):
    """The pytest node id of a JUnit test case (xunit1: file, classname, name)."""
    file, owner = case.get("file", "?").removeprefix("tests/"), case.get("classname", "").split(".")[-1]
    return "::".join([file, *([owner] if owner.startswith("Test") else []), case.get("name")])


def tally(junit, counts, failures, passed):
    """Adds one JUnit XML's outcomes per file to `counts`, (test, first error line) to `failures`
    and the node ids that passed to `passed`."""
    for case in ET.parse(junit).iter("testcase"):
        file = case.get("file", "?").removeprefix("tests/")
        problem = case.find("failure")
        problem = case.find("error") if problem is None else problem
        outcome = "passed"
        if problem is not None:
            outcome = "failed" if problem.tag == "failure" else "errored"
            text = problem.get("message") or problem.text or ""
            first = next((line for line in text.splitlines() if line.strip()), "")
            failures.append((node_id(case), first[:200]))
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            passed.append(node_id(case))
        counts[file][outcome] += 1


def report(counts, failures):
    """Prints the per-file table, the total and the failures; returns (tests run, total Counter)."""
    outcomes = ["passed", "failed", "errored", "skipped"]
    print(f"{'file':<58}" + "".join(f"{o:>9}" for o in outcomes))
    total = Counter()
    for file in sorted(counts):
        total.update(counts[file])
        print(f"{file:<58}" + "".join(f"{counts[file][o]:>9}" for o in outcomes))
    ran = total["passed"] + total["failed"] + total["errored"]
    percent = 100 * total["passed"] / ran if ran else 0
    print(f"{'TOTAL':<58}" + "".join(f"{total[o]:>9}" for o in outcomes))
    print(f"passed {total['passed']} of {ran} run ({percent:.1f}%), {total['skipped']} skipped, {len(counts)} files")
    if failures:
        print("\nfailures (first line of each error):")
        for test, first in failures:
            print(f"  {test}\n      {first}")
    return ran, total


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tests", nargs="*", help="files, node ids or @LIST (default: emulator_files.txt)")
    parser.add_argument("--endpoint", help="a running server, e.g. https://localhost:8081/")
    parser.add_argument("--partita", help="the binary to start when no --endpoint is given")
    parser.add_argument("--out", default=str(CACHE / "results"), help="where each file's JUnit XML and log go")
    parser.add_argument("--timeout", default="300", help="seconds one test may take")
    parser.add_argument("--ceiling-minutes", type=float, help="stop the whole run after this long (a failure)")
    parser.add_argument("--passed", help="write the node ids that passed here (to grow expected_pass.txt)")
    parser.add_argument("--fetch-only", action="store_true", help="download the suite and install its needs")
    args = parser.parse_args()

    # SIGTERM unwinds like an exception, so the server and the running pytest are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    fetch()
    install()
    if args.fetch_only:
        return 0
    server = None
    if args.endpoint:
        endpoint = args.endpoint
    else:
        release, debug = ROOT / "target/release/partita", ROOT / "target/debug/partita"
        server, port = start_server(args.partita or (release if release.exists() else debug))
        # localhost, as the emulator's address in the suite; the generated certificate covers it.
        endpoint = f"https://localhost:{port}/"
    env = dict(os.environ, ACCOUNT_HOST=endpoint, ACCOUNT_KEY=os.environ.get("ACCOUNT_KEY", EMULATOR_KEY))
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")])
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "partita_plugin", "-q"]
    pytest += ["-o", "junit_family=xunit1", "--tb=native", f"--timeout={args.timeout}"]
    by_file = defaultdict(list)  # one pytest per file: a crash or a hang costs that file only
    for test in selection(args.tests):
        by_file[test.split("::")[0]].append(test)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 60 * (args.ceiling_minutes or 24 * 60)
    counts, failures, passed, codes = defaultdict(Counter), [], [], []
    try:
        for file, tests in by_file.items():
            name = file.removesuffix(".py").replace("/", ".")
            junit, log = out / f"{name}.xml", out / f"{name}.log"
            junit.unlink(missing_ok=True)
            with open(log, "w") as sink:
                try:
                    run = [*pytest, f"--junitxml={junit}", *tests]
                    left = deadline - time.monotonic()
                    code = subprocess.run(run, cwd=SUITE, env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=left).returncode
                except subprocess.TimeoutExpired:
                    code = "over the time ceiling"
            codes.append(code)
            if junit.exists():
                tally(junit, counts, failures, passed)
            else:
                counts[file]["errored"] += 1
                failures.append((file, f"pytest wrote no report ({code}); see {log}"))
            print(f"{file}: " + ", ".join(f"{n} {o}" for o, n in counts[file].items()), file=sys.stderr, flush=True)
    finally:
        if server:
            server.terminate()
            server.wait()
    ran, total = report(counts, failures)
    if args.passed:
        Path(args.passed).write_text("".join(f"{test}\n" for test in passed))
    # pytest's own code catches what the XML cannot show: a node id that matched nothing (4).
    ok = all(code == 0 for code in codes) and ran > 0 and total["failed"] + total["errored"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
