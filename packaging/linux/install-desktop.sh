#!/bin/sh
# Add (or remove) the rmqstore Browser launcher and icon to the desktop menu, for this user.
#
#   ./install-desktop.sh               from the bundle folder (dist/rmqstore-browser/) or a checkout
#   ./install-desktop.sh --uninstall
#   DATA_HOME=/usr/local/share sudo -E ./install-desktop.sh     system-wide
#
# In a bundle the launcher runs the bundle's own binary (absolute path); otherwise it runs
# `rmqstore-browser` from PATH (pip install rmqstore).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
DATA_HOME=${DATA_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}}
APP=rmqstore-browser
SIZES="16 32 48 64 128 256 512"

if [ -x "$HERE/$APP" ] && [ -d "$HERE/_internal/resources" ]; then
    RES="$HERE/_internal/resources"; EXEC="\"$HERE/$APP\""
elif [ -d "$HERE/../../resources/icons" ]; then
    RES=$(cd "$HERE/../../resources" && pwd); EXEC=$APP
elif [ -d "$HERE/resources/icons" ]; then
    RES="$HERE/resources"; EXEC=$APP
else
    echo "install-desktop.sh: cannot find the resources folder next to $HERE" >&2; exit 1
fi

refresh() {
    command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$DATA_HOME/applications" || true
    command -v gtk-update-icon-cache >/dev/null 2>&1 && gtk-update-icon-cache -q -t "$DATA_HOME/icons/hicolor" || true
}

if [ "${1:-}" = "--uninstall" ]; then
    rm -f "$DATA_HOME/applications/$APP.desktop" "$DATA_HOME/icons/hicolor/scalable/apps/$APP.svg"
    for s in $SIZES; do rm -f "$DATA_HOME/icons/hicolor/${s}x${s}/apps/$APP.png"; done
    refresh
    echo "removed $APP from $DATA_HOME"
    exit 0
fi

mkdir -p "$DATA_HOME/applications" "$DATA_HOME/icons/hicolor/scalable/apps"
for s in $SIZES; do
    mkdir -p "$DATA_HOME/icons/hicolor/${s}x${s}/apps"
    cp "$RES/icons/app/rmqstore-$s.png" "$DATA_HOME/icons/hicolor/${s}x${s}/apps/$APP.png"
done
cp "$RES/icons/rmqstore.svg" "$DATA_HOME/icons/hicolor/scalable/apps/$APP.svg"
sed -e "s|^Exec=.*|Exec=$EXEC %f|" -e "s|^TryExec=.*|TryExec=$(echo "$EXEC" | tr -d '"')|" \
    "$RES/$APP.desktop" > "$DATA_HOME/applications/$APP.desktop"
chmod 644 "$DATA_HOME/applications/$APP.desktop"
refresh
echo "installed $DATA_HOME/applications/$APP.desktop (Exec=$EXEC)"
