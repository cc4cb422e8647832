#!/usr/bin/env bash
# keel against LangGraph on the same tool loop (see README.md beside this file).
# Installs the pinned LangGraph into bench/peer/.venv, runs its loop, runs keel's
# `cargo bench -p keel-runtime --bench tool_round` (release), and prints the raw ms/round figures of
# both sides and keel's over LangGraph's at R=200 (below 1 means keel is faster).
# Works from any directory; honours CARGO_TARGET_DIR if set.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$here/.venv"

if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"

echo "# LangGraph (Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'), langgraph $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("langgraph"))'))"
peer_out="$("$venv/bin/python" "$here/tool_round.py")"
echo "$peer_out"

echo "# keel (cargo bench -p keel-runtime --bench tool_round)"
keel_out="$(cd "$root" && cargo bench -p keel-runtime --bench tool_round)"
echo "$keel_out"

# The value of `name = value` in $2; fails loudly when the line is missing.
value() {
  local v
  v="$(printf '%s\n' "$2" | awk -v n="$1" '$1 == n && $2 == "=" { print $3 }')"
  if [[ -z "$v" ]]; then
    echo "run.sh: no line \`$1 = X\` in the bench output above" >&2
    exit 1
  fi
  printf '%s' "$v"
}

keel_mem="$(value ms_per_round_200 "$keel_out")"
keel_file="$(value file_ms_per_round_200 "$keel_out")"
lg_mem="$(value langgraph_memory_ms_per_round_200 "$peer_out")"
lg_sqlite="$(value langgraph_sqlite_ms_per_round_200 "$peer_out")"

echo "keel_memory_ms_per_round_200 = $keel_mem"
echo "keel_file_ms_per_round_200 = $keel_file"
echo "langgraph_memory_ms_per_round_200 = $lg_mem"
echo "langgraph_sqlite_ms_per_round_200 = $lg_sqlite"
awk -v k="$keel_mem" -v l="$lg_mem" 'BEGIN { printf "keel_over_langgraph_memory_200 = %.3f\n", k / l }'
awk -v k="$keel_file" -v l="$lg_sqlite" 'BEGIN { printf "keel_over_langgraph_sqlite_200 = %.3f\n", k / l }'
