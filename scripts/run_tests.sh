#!/usr/bin/env bash
# README command (2): set up, build, and run the whole test suite with ctest (arguments go to
# ctest). After ctest's own summary, one line says why the tests that did not run were skipped
# (ctest lists them only as "(Skipped)"); the exit status stays ctest's.
# NANOVLLM_BUILD_DIR picks the build folder (as for build.sh); NANOVLLM_SKIP_BUILD=1 runs the
# tests of that folder as it is, without set-up or build.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ ${NANOVLLM_SKIP_BUILD:-0} != 1 ]]; then
  bash scripts/setup.sh
  bash scripts/build.sh
fi
cd "${NANOVLLM_BUILD_DIR:-build}"
junit=$PWD/Testing/run_tests.junit.xml
rm -f "$junit"
rc=0
ctest --output-on-failure -j "$(nproc)" --output-junit "$junit" "$@" || rc=$?
# The skip reason is what the test printed: GTEST_SKIP()'s message (the line after
# "file:line: Skipped") or a script's "SKIP: reason" line, else ctest's own
# (SKIP_RETURN_CODE=..., Disabled). The last line is the plain count
# "run_tests: N passed, N failed, N skipped", so the run still closes on a test count.
python3 - "$junit" <<'PY' || true
import collections, json, re, subprocess, sys
import xml.etree.ElementTree as ET
every = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
cases = [c for c in every if c.get("status") in ("notrun", "disabled")]
failed = sum(1 for c in every if c.get("status") == "fail" or c.find("failure") is not None)
closing = f"run_tests: {len(every) - len(cases) - failed} passed, {failed} failed, {len(cases)} skipped"
if not cases:
    print(closing)
    sys.exit(0)
listing = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], capture_output=True,
                                    text=True).stdout or "{}")
labels = {t["name"]: next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
          for t in listing.get("tests", [])}
groups = collections.Counter()
for c in cases:
    out = c.findtext("system-out") or ""
    m = re.search(r":\d+: Skipped\n(.+?)\n", out) or re.search(r"^SKIP: (.+)$", out, re.M)
    skipped = c.find("skipped")
    reason = m.group(1).strip() if m else (skipped.get("message") if skipped is not None else "disabled")
    label = ", ".join(labels.get(c.get("name"), []))
    groups[(reason, f"label {label}" if label else "no label")] += 1
print(f"run_tests: {len(cases)} tests did not run: " +
      "; ".join(f"{n} {reason} ({label})" for (reason, label), n in groups.most_common()))
print(closing)
PY
exit "$rc"
