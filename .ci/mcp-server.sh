#!/usr/bin/env bash
# Installs the MCP reference server (@modelcontextprotocol/server-everything, the version pinned
# in .ci/mcp-server/package-lock.json) outside git and prints the path of its entry script
# (run it with `node PATH stdio` or `PORT=N node PATH streamableHttp`).
# Needs node >= 20 and npm. Installs into $KEEL_MCP_SERVER_DIR (default target/mcp-server);
# a second run reuses the installation when the lock file is unchanged.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${KEEL_MCP_SERVER_DIR:-$root/target/mcp-server}"
command -v node >/dev/null || { echo "mcp-server.sh: node is not installed (need node >= 20)" >&2; exit 1; }
command -v npm >/dev/null || { echo "mcp-server.sh: npm is not installed" >&2; exit 1; }
major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$major" -ge 20 ] || { echo "mcp-server.sh: node $(node --version) is too old (need >= 20)" >&2; exit 1; }
entry="$dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
mkdir -p "$dir"
if ! cmp -s "$root/.ci/mcp-server/package-lock.json" "$dir/package-lock.json" || [ ! -f "$entry" ]; then
  cp "$root/.ci/mcp-server/package.json" "$root/.ci/mcp-server/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
[ -f "$entry" ] || { echo "mcp-server.sh: $entry is missing after npm ci" >&2; exit 1; }
echo "$entry"
