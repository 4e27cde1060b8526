#!/usr/bin/env bash
# README command (2): set up, build, and run the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build && ctest --output-on-failure -j "$(nproc)" "$@"
