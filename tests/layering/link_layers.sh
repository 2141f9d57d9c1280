#!/usr/bin/env bash
# SPDX-License-Identifier: MIT OR Apache-2.0
# Link-time layering (docs/architecture.md, "Targets"), run by CTest (link_layers):
#   tests/layering/link_layers.sh <nm> core=<libkiln_core.a> fusion=<...> cpu=<...> ...
# Each library may use the symbols of the layers below it (BELOW) and of no other Kiln library:
# a symbol a library leaves undefined that only a library outside its BELOW defines is a
# violation, printed as "layer -> other layer: symbol". Static archives and shared libraries
# (BUILD_SHARED_LIBS=ON, read with nm -D) both work.
set -euo pipefail

declare -A BELOW=(
  [core]=""
  [kernel]="core"
  [fusion]="core"
  [cpu]="fusion core"
  [vulkan]="kernel core"
  [nn]="core"
  [store]="nn core"
  [vision]="nn core"
  [rl]="nn core"
  [onnx]="vision store nn fusion core"
  [dist]="nn core"
  [remote]="core"
  [kiln]="remote dist onnx rl vision store nn cpu vulkan fusion kernel core"
  [data]="core"
  [train]="dist data store nn core"
  [text]="data core"
)
# Existing violations, "layer>other layer" (none today). An entry that no longer occurs is
# reported: delete it, and the link in CMakeLists.txt that let it build.
ALLOWED=()

nm_tool=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

layers=()
for arg in "$@"; do
  name=${arg%%=*}
  lib=${arg#*=}
  [[ -v BELOW[$name] ]] || { echo "link_layers: unknown layer '$name'" >&2; exit 2; }
  [[ -f $lib ]] || { echo "link_layers: $lib: no such library (build it first)" >&2; exit 2; }
  layers+=("$name")
  dyn=()
  [[ $lib == *.so* ]] && dyn=(-D)
  # POSIX format: "symbol type [value size]"; member headers of archives end in ':'.
  "$nm_tool" "${dyn[@]}" -P -g "$lib" 2>/dev/null | awk -v d="$work/$name.def" -v u="$work/$name.undef" '
    NF >= 2 && $1 !~ /:$/ {
      if ($2 == "U") print $1 > u
      else if ($2 != "w" && $2 != "v") print $1 > d
    }'
  touch "$work/$name.def" "$work/$name.undef"
  sort -u -o "$work/$name.def" "$work/$name.def"
  sort -u -o "$work/$name.undef" "$work/$name.undef"
done

fail=0
used=()
for name in "${layers[@]}"; do
  # Undefined here, defined neither here nor below.
  cat "$work/$name.def" > "$work/ok"
  for below in ${BELOW[$name]}; do
    [[ -f $work/$below.def ]] && cat "$work/$below.def" >> "$work/ok"
  done
  sort -u -o "$work/ok" "$work/ok"
  comm -23 "$work/$name.undef" "$work/ok" > "$work/missing"
  for other in "${layers[@]}"; do
    [[ $other == "$name" ]] && continue
    comm -12 "$work/missing" "$work/$other.def" > "$work/hits"
    [[ -s $work/hits ]] || continue
    n=$(wc -l < "$work/hits")
    if [[ " ${ALLOWED[*]} " == *" $name>$other "* ]]; then
      used+=("$name>$other")
      echo "allowed: $name -> $other ($n symbols)"
      continue
    fi
    fail=1
    echo "layering violation: $name uses $n symbols of $other, a layer not below it:"
    head -n 10 "$work/hits" | c++filt | sed 's/^/    /'
    (( n > 10 )) && echo "    ..."
  done
done
for a in "${ALLOWED[@]}"; do
  if [[ " ${used[*]} " != *" $a "* ]]; then
    echo "note: ${a/>/ -> } no longer occurs: delete its entry from ALLOWED in tests/layering/link_layers.sh"
  fi
done
if (( fail )); then
  echo "Link layering (tests/layering/link_layers.sh): a library uses a layer above it. Move the"
  echo "code down, or let the upper layer register it in core's tables (src/core/registry.h)."
  exit 1
fi
echo "Link layering holds: ${layers[*]}"
