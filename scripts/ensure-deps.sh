#!/usr/bin/env bash
# Makes sure a Debian 12 / Ubuntu machine has what nish-driver's build and tests need:
# the Debian packages of the private test desktop, a Rust toolchain and the Python venv with
# the official MCP SDK (used by the conformance tests as a reference client).
#
# Idempotent: it checks before it changes anything, and runs apt-get only when a package is
# missing. Run it as root, or as a user with sudo.
#
#   scripts/ensure-deps.sh            everything (desktop tests, Chromium, MCP venv)
#   scripts/ensure-deps.sh --minimal  only what the mock-backend tests need (Python venv + pip)
#   scripts/ensure-deps.sh --dry-run  say what would be done, change nothing
set -euo pipefail

usage() {
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
}

minimal=0
dry_run=0
for arg in "$@"; do
    case "$arg" in
        --minimal) minimal=1 ;;
        --dry-run) dry_run=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "ensure-deps: unknown argument: $arg" >&2; usage >&2; exit 2 ;;
    esac
done

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.cache/venv"
mcp_requirement='mcp>=2.3,<3'
rust_min='1.88'

step() { printf 'ensure-deps: %s\n' "$*"; }
fail() { printf 'ensure-deps: error: %s\n' "$*" >&2; exit 1; }

# Packages the mock-backend tests need: the reference MCP client runs in a venv; systemd-analyze
# verifies the user unit (nothing is started); setpriv (util-linux) plays another user; the YAML
# and TOML readers check the hosts' configs that `nish-driver mcp-config` prints.
# The build needs PipeWire's headers (the broker reads a Wayland capture's frame with
# libpipewire) and clang for the bindings' generator.
minimal_packages=(python3-venv python3-pip python3-yaml python3-tomli systemd util-linux
    pkg-config libpipewire-0.3-dev libspa-0.2-dev clang libclang-dev)
# The private headless desktop of the end-to-end tests and the demo (Xephyr nests the desktop in
# Xvfb so the person has a real input device; tesseract reads the consent dialog in a test;
# mutter runs headless as the Wayland test desktop's compositor; xwayland lets one test give it
# an X server, whose XTEST clients must not reach the Wayland consent dialog; PyQt5 runs the Qt
# app of the Qt typing test; pipewire, wireplumber and the desktop portal with its GNOME
# backend let the Wayland test desktop start the portals by D-Bus activation against bare
# mutter; sway (with swaymsg) is the wlroots compositor of the sway tests, started headless in
# a user namespace by util-linux's unshare; kwin-wayland is KDE Plasma's compositor of the KWin
# tests, with the KDE desktop portal, whose RemoteDesktop plays the person there, and
# qtwayland5, which the portal and the Qt app need on Wayland; wl-clipboard is the other
# Wayland client that reads and holds the clipboard in the sway and KWin tests; grim reads
# sway's screen to check the takeover frame; setxkbmap, of
# x11-xkb-utils, gives the person a second keyboard layout in the input agent's tests). The consent dialog draws with the system's fonts: DejaVu for Latin, Greek, Cyrillic
# and Arabic, WenQuanYi Micro Hei (5 MB, the smallest) for Chinese and Japanese.
desktop_packages=(
    xvfb xserver-xephyr xauth x11-utils x11-xserver-utils xfonts-base fonts-dejavu-core fonts-wqy-microhei
    tesseract-ocr tesseract-ocr-eng
    xdotool xinput xclip x11-xkb-utils
    dbus dbus-x11 at-spi2-core libatk-adaptor
    openbox
    mutter xwayland sway kwin-wayland xdg-desktop-portal-kde qtwayland5 wl-clipboard grim
    pipewire wireplumber xdg-desktop-portal xdg-desktop-portal-gnome
    gtk-3-examples gtk-4-examples
    python3-gi gir1.2-atspi-2.0 gir1.2-gtk-3.0 gir1.2-gtk-4.0 python3-xlib python3-pyatspi
    python3-pyqt5
    chromium
)
# Packages the tests can run without (their tests are skipped) when the distribution has no
# installable candidate (Ubuntu ships Chromium as a snap only).
optional_packages=(chromium)

if [ "$minimal" -eq 1 ]; then
    packages=("${minimal_packages[@]}")
else
    packages=("${minimal_packages[@]}" "${desktop_packages[@]}")
fi

# ---- privilege -------------------------------------------------------------------------------
as_root=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        as_root=(sudo)
    else
        as_root=(missing-root)
    fi
fi

# Runs a command as root; its output goes to a log that is shown only when it fails.
run_root() {
    if [ "${as_root[0]:-}" = missing-root ]; then
        fail "need root for: $* (run as root or install sudo)"
    fi
    if [ "$dry_run" -eq 1 ]; then
        step "would run: ${as_root[*]:+${as_root[*]} }$*"
        return 0
    fi
    local log
    log="$(mktemp)"
    if ! "${as_root[@]}" "$@" >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        fail "failed: $*"
    fi
    rm -f "$log"
}

is_optional() {
    local p
    for p in "${optional_packages[@]}"; do
        [ "$p" = "$1" ] && return 0
    done
    return 1
}

# ---- Debian packages -------------------------------------------------------------------------
command -v dpkg-query >/dev/null 2>&1 || fail "dpkg-query not found: this script supports Debian and Ubuntu only"

missing=()
for p in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)"
    case "$status" in
        ii*) ;;
        *) missing+=("$p") ;;
    esac
done

if [ "${#missing[@]}" -eq 0 ]; then
    step "packages: all ${#packages[@]} installed"
else
    step "packages: missing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    run_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    installable=()
    for p in "${missing[@]}"; do
        candidate="$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2; exit}')"
        if [ -n "$candidate" ] && [ "$candidate" != "(none)" ]; then
            installable+=("$p")
        elif [ "$dry_run" -eq 1 ]; then
            installable+=("$p")
        elif is_optional "$p"; then
            step "packages: $p has no installable candidate here; tests that need it will be skipped"
        else
            fail "package $p has no installable candidate (check the apt sources)"
        fi
    done
    if [ "${#installable[@]}" -gt 0 ]; then
        run_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${installable[@]}"
        [ "$dry_run" -eq 1 ] || step "packages: installed ${installable[*]}"
    fi
fi

# ---- Rust ------------------------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    PATH="$HOME/.cargo/bin:$PATH"
fi
if ! command -v cargo >/dev/null 2>&1; then
    cat >&2 <<EOF
ensure-deps: error: no Rust toolchain (cargo not found).
  Install rustup from your distribution (apt-get install rustup, on Debian 13 / Ubuntu 24.04
  and later) or as described at https://rustup.rs, then run:
    rustup toolchain install stable
  nish-driver needs Rust $rust_min or newer. Then run this script again.
EOF
    exit 1
fi
rustc_version="$(rustc --version 2>/dev/null | awk '{print $2}')"
if [ -n "$rustc_version" ] && [ "$(printf '%s\n%s\n' "$rust_min" "$rustc_version" | sort -V | head -n1)" != "$rust_min" ]; then
    fail "rustc $rustc_version is older than $rust_min: run 'rustup update stable'"
fi
step "rust: cargo $(cargo --version | awk '{print $2}'), rustc ${rustc_version:-unknown}"

# ---- Python venv with the MCP SDK ------------------------------------------------------------
mcp_ok() {
    [ -x "$venv/bin/python" ] || return 1
    "$venv/bin/python" - <<'EOF' >/dev/null 2>&1
import importlib.metadata as m
major, minor = (int(x) for x in m.version("mcp").split(".")[:2])
raise SystemExit(0 if (major, minor) >= (2, 3) and major < 3 else 1)
EOF
}

if [ -x "$venv/bin/python" ]; then
    step "venv: $venv exists"
else
    if [ "$dry_run" -eq 1 ]; then
        step "would run: /usr/bin/python3 -m venv --system-site-packages $venv"
    else
        mkdir -p "$(dirname "$venv")"
        /usr/bin/python3 -m venv --system-site-packages "$venv"
        step "venv: created $venv"
    fi
fi

if mcp_ok; then
    step "venv: $("$venv/bin/python" -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))') installed"
elif [ "$dry_run" -eq 1 ]; then
    step "would run: $venv/bin/pip install '$mcp_requirement'"
else
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$mcp_requirement"
    mcp_ok || fail "pip installed mcp but it does not satisfy $mcp_requirement"
    step "venv: installed $("$venv/bin/python" -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))')"
fi

step "done"
