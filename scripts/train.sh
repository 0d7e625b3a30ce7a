#!/usr/bin/env bash
# Quick start 1: builds eggroll and runs the default training job (extra arguments go to
# `eggroll train`, e.g. scripts/train.sh configs/sphere.toml).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/apps/eggroll/eggroll train "$@"
