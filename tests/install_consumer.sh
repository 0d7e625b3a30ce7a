#!/usr/bin/env bash
# Installs eggroll from the build folder into a temporary prefix, then builds and runs
# examples/ as a separate CMake project that finds it with find_package(eggroll).
set -euo pipefail
src=$1 build=$2 sanitize=${3:-}
flags=()
[ -n "$sanitize" ] && flags=(-DCMAKE_CXX_FLAGS="-fsanitize=$sanitize")  # match a sanitized library
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/examples" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release "${flags[@]}" >/dev/null
cmake --build "$tmp/consumer" -j2 >/dev/null
LD_LIBRARY_PATH="$tmp/prefix/lib:${LD_LIBRARY_PATH:-}" "$tmp/consumer/ask_tell"
echo "find_package(eggroll) consumer: ok"
