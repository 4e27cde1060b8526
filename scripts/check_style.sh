#!/usr/bin/env bash
# Style gates that CI runs through ctest:
#   check_style.sh format          every tracked C++/CUDA file is as clang-format-14 writes it
#   check_style.sh naming BUILD    names follow .clang-tidy (clang-tidy-14 over BUILD's
#                                  compile_commands.json, C++ sources; CUDA files are
#                                  formatted but not parsed by clang-tidy); a source that
#                                  passed is not parsed again until what it reads changes
# Prints each offence and exits 1 when there is one. `format --fix` rewrites the files.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=${1:?usage: check_style.sh format [--fix] | naming BUILD_DIR}

sources() { git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | grep -v '^tests/fixtures/'; }

case $mode in
  format)
    if [[ ${2:-} == --fix ]]; then
      sources | xargs clang-format-14 -i
      exit 0
    fi
    if ! sources | xargs clang-format-14 --dry-run -Werror 2>/tmp/nanovllm-format.$$; then
      grep -E '^[^ ].*(error|warning):' /tmp/nanovllm-format.$$ | cut -d: -f1 | sort -u |
        sed 's/^/not formatted: /'
      rm -f /tmp/nanovllm-format.$$
      echo "run: bash scripts/check_style.sh format --fix" >&2
      exit 1
    fi
    rm -f /tmp/nanovllm-format.$$
    echo "format: every file as clang-format-14 writes it"
    ;;
  naming)
    build=${2:?naming needs the build folder (compile_commands.json)}
    exec python3 - "$build" <<'PY'
# clang-tidy-14 over the C++ sources of compile_commands.json, as many at once as there are
# cores, the slowest of the last run first. Parsing a source with its headers is the cost
# (about 2 s each; the naming check itself is a third of it), so a source that passed is
# remembered by a hash of everything its verdict depends on: the source and every project file
# it includes (#includes resolved through the compile command's include folders, followed
# recursively; #if is ignored, so the set is never smaller than the compiler's), its compile
# command, each .clang-tidy, this script and clang-tidy's version. An unchanged source then
# costs a hash, not a parse. Passes are kept in BUILD/naming-cache/ and in
# ${XDG_CACHE_HOME:-~/.cache}/nanovllm/naming/ (shared by the clones of one machine; entries
# unused for 30 days go); failures are never kept. NANOVLLM_NAMING_CACHE=off checks every
# source. System headers are not in the key: after upgrading a library whose macros declare
# names in our code (gtest's TEST), clear the cache or set NANOVLLM_NAMING_CACHE=off once.
import hashlib, json, os, re, shlex, subprocess, sys, threading, time

TIDY = "clang-tidy-14"
build = os.path.abspath(sys.argv[1])
root = os.getcwd()
# A source compiled into several targets with the same flags is checked once (clang-tidy -p
# BUILD would parse it once per compile command), so clang-tidy reads a copy of the database
# without those repeats.
entries, unique = {}, []
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    path = os.path.normpath(os.path.join(e["directory"], e["file"]))
    args = e.get("arguments") or shlex.split(e["command"])
    args = [a for i, a in enumerate(args) if a != "-o" and (i == 0 or args[i - 1] != "-o")]
    command = (e["directory"], args)
    if path.endswith(".cpp") and command not in entries.setdefault(path, []):
        entries[path].append(command)
        unique.append(e)

use_cache = os.environ.get("NANOVLLM_NAMING_CACHE", "on").lower() not in ("off", "0", "no")
local_dir = os.path.join(build, "naming-cache")
shared_dir = os.path.join(os.environ.get("XDG_CACHE_HOME") or
                          os.path.join(os.path.expanduser("~"), ".cache"), "nanovllm", "naming")
INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include(?:_next)?[ \t]*(?:([<"])([^>"\n]+)[>"]|\w)', re.M)
digests, direct, configs, closures = {}, {}, {}, {}


def digest(path):
    if path not in digests:
        with open(path, "rb") as f:
            digests[path] = hashlib.sha256(f.read()).hexdigest()
    return digests[path]


def project_includes(path, quote_dirs, angle_dirs):
    """The project files `path` names in #include lines; None if one names a macro."""
    key = (path, quote_dirs, angle_dirs)
    if key not in direct:
        found = []
        with open(path, "rb") as f:
            text = f.read()
        for m in INCLUDE.finditer(text):
            if not m.group(1):
                found = None  # `#include MACRO`: the file is unknown, so is the verdict
                break
            name = m.group(2).decode()
            dirs = ((os.path.dirname(path),) + quote_dirs if m.group(1) == b'"' else ()) + angle_dirs
            for d in dirs:
                candidate = os.path.normpath(os.path.join(d, name))
                if os.path.isfile(candidate):
                    if candidate.startswith(root + os.sep):
                        found.append(candidate)
                    break
        direct[key] = found
    return direct[key]


def include_dirs(directory, args):
    quote, angle = [], []
    flags = (("-iquote", quote), ("-isystem", angle), ("-idirafter", angle), ("-I", angle))
    i = 0
    while i < len(args):
        for flag, dest in flags:
            if args[i] == flag and i + 1 < len(args):
                dest.append(os.path.join(directory, args[i + 1]))
                i += 1
                break
            if args[i].startswith(flag) and len(args[i]) > len(flag):
                dest.append(os.path.join(directory, args[i][len(flag):]))
                break
        i += 1
    return tuple(quote), tuple(angle)


def config_files(directory):
    """The .clang-tidy files clang-tidy may read for a file in `directory` (it and above)."""
    if directory not in configs:
        here = os.path.join(directory, ".clang-tidy")
        parent = os.path.dirname(directory)
        configs[directory] = (([here] if os.path.isfile(here) else []) +
                              (config_files(parent) if parent != directory else []))
    return configs[directory]


def cache_key(source, commands, config):
    lines, closure = [config, os.path.relpath(source, root)], set()
    for directory, args in commands:
        lines.append(" ".join(a.replace(root, "<root>") for a in [directory] + args))
        quote_dirs, angle_dirs = include_dirs(directory, args)
        todo = [source]
        while todo:
            path = todo.pop()
            if path not in closure:
                closure.add(path)
                found = project_includes(path, quote_dirs, angle_dirs)
                if found is None:
                    return None
                todo.extend(found)
    closures[source] = closure
    tidy_configs = {c for p in closure for c in config_files(os.path.dirname(p))}
    lines += [os.path.relpath(p, root) + " " + digest(p) for p in sorted(closure | tidy_configs)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def cached(key):
    for d in (local_dir, shared_dir):
        marker = os.path.join(d, key)
        if os.path.exists(marker):
            try:
                os.utime(marker)  # used: the shared cache's age-out starts again
            except OSError:
                pass
            return True
    return False


def remember(key):
    for d in (local_dir, shared_dir):
        try:
            os.makedirs(d, exist_ok=True)
            open(os.path.join(d, key), "w").close()
        except OSError:
            pass  # a read-only home: the build folder's cache still works


def run_tidy(sources):
    start = time.monotonic()
    r = subprocess.run([TIDY, "-p", db_dir, "--quiet"] + sources, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return r.returncode, r.stdout, time.monotonic() - start


started = time.monotonic()
db_dir = os.path.join(local_dir, "db")
os.makedirs(db_dir, exist_ok=True)
with open(os.path.join(db_dir, "compile_commands.json"), "w") as f:
    json.dump(unique, f, indent=0)
config = "\n".join(["nanovllm naming cache 1",
                    subprocess.run([TIDY, "--version"], capture_output=True, text=True).stdout,
                    digest(os.path.join(root, "scripts", "check_style.sh"))])
keys = {s: cache_key(s, e, config) if use_cache else None for s, e in entries.items()}
todo = [s for s, k in keys.items() if k is None or not cached(k)]
times_file = os.path.join(local_dir, "times.json")
try:
    times = json.load(open(times_file))
except (OSError, ValueError):
    times = {}
# Batches: a process parses the next source into memory it already holds (a new process
# spends 0.1 s of system time per source faulting its pages in). Each batch takes its share
# of what is left, so the batches shrink and both cores finish together.
expected = lambda s: times.get(os.path.relpath(s, root), 2.0)
pending = sorted(todo, key=expected, reverse=True)
workers = min(os.cpu_count() or 1, max(len(todo), 1))
lock = threading.Lock()
errors, broken, passed = set(), [], []


def worker():
    while True:
        with lock:
            share = sum(map(expected, pending)) / (2 * workers)
            batch, batch_time = [], 0.0
            while pending and (not batch or batch_time + expected(pending[0]) <= share):
                batch_time += expected(pending[0])
                batch.append(pending.pop(0))
        if not batch:
            return
        rc, out, seconds = run_tidy(batch)
        with lock:
            for source in batch:  # the batch's time, shared by what the last run measured
                times[os.path.relpath(source, root)] = round(seconds * expected(source) / batch_time, 2)
            lines = [l for l in out.splitlines() if "error:" in l]
            errors.update(lines)
            # Offences are named by file. A source passed if none is in a file it includes,
            # provided every offence is in one of the batch's sources (one in a header, or
            # none named, leaves each source of the batch unknown: they run again).
            bad = {os.path.normpath(l.split(":", 1)[0]) for l in lines}
            if rc == 0 or bad <= set(batch):
                passed.extend(b for b in batch if not bad & closures.get(b, {b}))
            if rc == 0:
                continue
            if not lines:
                names = " ".join(os.path.relpath(b, root) for b in batch)
                broken.append(f"{TIDY} exited {rc} on {names}:\n{out[-2000:]}")


threads = [threading.Thread(target=worker) for _ in range(workers)]
for t in threads:
    t.start()
for t in threads:
    t.join()

if use_cache:
    digests.clear()  # a pass is kept only if no file it read was edited while clang-tidy ran
    direct.clear()
    for source in passed:
        if keys[source] and cache_key(source, entries[source], config) == keys[source]:
            remember(keys[source])
    with open(times_file, "w") as f:
        json.dump(times, f, indent=0, sort_keys=True)
    live = {k for k in keys.values() if k}
    for d, keep in ((local_dir, lambda name, age: name in live),
                    (shared_dir, lambda name, age: age < 30 * 86400)):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        now = time.time()
        for name in names:
            p = os.path.join(d, name)
            try:
                if len(name) == 64 and not keep(name, now - os.path.getmtime(p)):
                    os.remove(p)
            except OSError:
                pass  # another run removed it first

for line in sorted(errors):
    print(line)
for b in broken:
    print(b)
summary = (f"{len(entries) - len(todo)} from the cache, {len(todo)} checked, "
           f"{time.monotonic() - started:.0f} s")
if errors or broken:
    print(f"naming: offences in {len(entries)} sources ({summary})")
    sys.exit(1)
print(f"naming: {len(entries)} sources follow .clang-tidy ({summary})")
PY
    ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
