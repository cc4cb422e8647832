#!/usr/bin/env bash
# Installs the MCP reference server (@modelcontextprotocol/server-everything, the version pinned
# in .ci/mcp-server/package-lock.json) outside git and prints the path of its entry script
# (run it with `node PATH stdio` or `PORT=N node PATH streamableHttp`).
#
# `--node-bin` prints instead the directory of the node (>= 20) it uses: the system's when it
# is recent enough, otherwise node v20 downloaded from nodejs.org (checked against the
# release's SHASUMS256.txt) into the install directory. Put it first on PATH.
#
# Installs into $KEEL_MCP_SERVER_DIR (default target/mcp-server); a second run reuses the
# installation while the lock file is unchanged. Any failure exits non-zero, saying why.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${KEEL_MCP_SERVER_DIR:-$root/target/mcp-server}"
NODE_VERSION=v20.20.2
mkdir -p "$dir"

node_ok() { command -v node >/dev/null && [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ]; }

if ! node_ok; then
  case "$(uname -m)" in
    x86_64) arch=x64 ;;
    aarch64|arm64) arch=arm64 ;;
    *) echo "mcp-server.sh: no node >= 20 and no download for $(uname -m); install node 20 or later" >&2; exit 1 ;;
  esac
  name="node-$NODE_VERSION-linux-$arch"
  if [ ! -x "$dir/$name/bin/node" ]; then
    echo "mcp-server.sh: node >= 20 not found; downloading $name from nodejs.org" >&2
    (
      cd "$dir"
      curl -fsSLO "https://nodejs.org/dist/$NODE_VERSION/$name.tar.xz"
      curl -fsSL "https://nodejs.org/dist/$NODE_VERSION/SHASUMS256.txt" | grep " $name.tar.xz\$" | sha256sum -c - >&2
      tar -xJf "$name.tar.xz"
      rm -f "$name.tar.xz"
    ) || { echo "mcp-server.sh: could not install $name (network, checksum or tar failed)" >&2; exit 1; }
  fi
  export PATH="$dir/$name/bin:$PATH"
  node_ok || { echo "mcp-server.sh: $dir/$name/bin/node does not run" >&2; exit 1; }
fi

if [ "${1:-}" = "--node-bin" ]; then
  dirname "$(command -v node)"
  exit 0
fi

command -v npm >/dev/null || { echo "mcp-server.sh: npm is not installed beside node $(command -v node)" >&2; exit 1; }
entry="$dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
if ! cmp -s "$root/.ci/mcp-server/package-lock.json" "$dir/package-lock.json" || [ ! -f "$entry" ]; then
  cp "$root/.ci/mcp-server/package.json" "$root/.ci/mcp-server/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2) || { echo "mcp-server.sh: npm ci failed in $dir" >&2; exit 1; }
fi
[ -f "$entry" ] || { echo "mcp-server.sh: $entry is missing after npm ci" >&2; exit 1; }
echo "$entry"
