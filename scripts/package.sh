#!/usr/bin/env bash
# Builds nish-driver's release package into target/dist/:
#
#   nish-driver_<version>_<arch>.deb          (dpkg --print-architecture: amd64, arm64, ...)
#   nish-driver-<version>-<arch>-linux.tar.gz (uname -m: x86_64, aarch64, ...)
#
# Both hold the same tree:
#   usr/bin/nish-driver, usr/bin/nish-mcp
#   usr/libexec/nish-driver/{nish-reader,nish-input,nish-indicator}
#   usr/lib/systemd/user/nish-driver.service
#   usr/share/applications/nish-driver.desktop (hidden; lets KWin stream a window to the broker)
#   usr/share/doc/nish-driver/{README.md,LICENSE,copyright,docs/*.md}
# The tarball's tree is under nish-driver-<version>/ (unpack it into / or a prefix's parent).
# Nothing of the test crates is in either.
#
#   scripts/package.sh                  build the release binaries, then package them
#   scripts/package.sh --no-build       package the binaries already in target/release
#   scripts/package.sh --profile debug  package target/debug's (the test suite checks the
#                                       packaging this way, without a second build)
#   scripts/package.sh --out DIR        write the two files to DIR instead of target/dist
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

build=1
profile=release
dist="$repo/target/dist"
while [ $# -gt 0 ]; do
    case "$1" in
        --no-build) build=0 ;;
        --profile) profile="$2"; build=0; shift ;;
        --out) dist="$2"; shift ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "package: unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done

binaries=(nish-driver nish-mcp)
agents=(nish-reader nish-input nish-indicator)
if [ "$build" -eq 1 ]; then
    cargo build --release --locked -p nish-driver -p nish-mcp -p nish-reader -p nish-input \
        -p nish-indicator
fi
for b in "${binaries[@]}" "${agents[@]}"; do
    [ -x "target/$profile/$b" ] || { echo "package: target/$profile/$b is missing" >&2; exit 1; }
done

version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)"
[ -n "$version" ] || { echo "package: no version in Cargo.toml" >&2; exit 1; }
deb_arch="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
tar_arch="$(uname -m)"
mkdir -p "$dist"
stage="$dist/stage"
rm -rf "$stage"
mkdir -p "$stage/root"
root="$stage/root"

install -d -m 0755 "$root/usr/bin" "$root/usr/libexec/nish-driver" \
    "$root/usr/lib/systemd/user" "$root/usr/share/doc/nish-driver/docs" \
    "$root/usr/share/applications"
for b in "${binaries[@]}"; do
    install -m 0755 "target/$profile/$b" "$root/usr/bin/$b"
done
for a in "${agents[@]}"; do
    install -m 0755 "target/$profile/$a" "$root/usr/libexec/nish-driver/$a"
done
install -m 0644 systemd/nish-driver.service "$root/usr/lib/systemd/user/nish-driver.service"
install -m 0644 systemd/nish-driver.desktop "$root/usr/share/applications/nish-driver.desktop"
install -m 0644 README.md LICENSE "$root/usr/share/doc/nish-driver/"
install -m 0644 docs/*.md "$root/usr/share/doc/nish-driver/docs/"
cat > "$root/usr/share/doc/nish-driver/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: nish-driver

Files: *
Copyright: the nish-driver developers
License: Apache-2.0
 On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0, and it is
 shipped as /usr/share/doc/nish-driver/LICENSE.
EOF
chmod 0644 "$root/usr/share/doc/nish-driver/copyright"

# The .deb.
pkg="$stage/deb"
mkdir -p "$pkg"
cp -a "$root/." "$pkg/"
mkdir -p "$pkg/DEBIAN"
size="$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)"
cat > "$pkg/DEBIAN/control" <<EOF
Package: nish-driver
Version: $version
Architecture: $deb_arch
Section: utils
Priority: optional
Installed-Size: $size
Depends: libc6, libgcc-s1, libpipewire-0.3-0 | libpipewire-0.3-0t64
Recommends: at-spi2-core
Description: lets AI agents read and operate desktop apps through MCP, safely
 A broker (nish-driver, a systemd user service) decides everything: the person's
 consent and its app scope, the lease, takeover, approvals, the kill switch and
 the audit. Sandboxed agents read apps through accessibility (nish-reader), act
 on them (nish-input) and show the consent dialog and takeover frame
 (nish-indicator); nish-mcp connects one MCP host.
EOF
deb="$dist/nish-driver_${version}_${deb_arch}.deb"
rm -f "$deb"
# No Maintainer field: the project names no address of a person (dpkg-deb warns, and builds).
dpkg-deb --root-owner-group -Zgzip --build "$pkg" "$deb" >/dev/null 2>&1 || dpkg-deb --root-owner-group -Zgzip --build "$pkg" "$deb"

# The tarball.
tarball="$dist/nish-driver-${version}-${tar_arch}-linux.tar.gz"
top="nish-driver-$version"
rm -rf "${stage:?}/$top"
cp -a "$root" "$stage/$top"
tar -C "$stage" --owner=0 --group=0 --numeric-owner -czf "$tarball" "$top"
rm -rf "$stage"
echo "$deb"
echo "$tarball"
