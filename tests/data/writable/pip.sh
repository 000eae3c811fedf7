#!/bin/sh
# `pip install --no-index` of a pure-Python wheel, written here by hand
# (a zip of the package, METADATA, WHEEL, entry points and RECORD), into a
# venv made under WORK; then the package is imported, its console script
# run, and it is uninstalled.
# Usage: pip.sh WORK
set -eu
work=$1
mkdir -p "$work"
cd "$work"
python3 - <<'PY'
import base64, hashlib, os, zipfile

files = {
    "cordon_probe/__init__.py": (
        "def greet():\n"
        "    return 'hello from an installed wheel'\n"
        "\n"
        "def main():\n"
        "    print('console script:', greet())\n"
    ),
    "cordon_probe/data.txt": "package data\n",
    "cordon_probe-1.0.dist-info/METADATA": (
        "Metadata-Version: 2.1\nName: cordon-probe\nVersion: 1.0\nSummary: A wheel made by hand\n"
    ),
    "cordon_probe-1.0.dist-info/WHEEL": (
        "Wheel-Version: 1.0\nGenerator: by-hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    ),
    "cordon_probe-1.0.dist-info/entry_points.txt": "[console_scripts]\ncordon-probe = cordon_probe:main\n",
    "cordon_probe-1.0.dist-info/top_level.txt": "cordon_probe\n",
}
record = []
os.makedirs("dist", exist_ok=True)
with zipfile.ZipFile("dist/cordon_probe-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
    for name, text in files.items():
        data = text.encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
        z.writestr(name, data)
    record.append("cordon_probe-1.0.dist-info/RECORD,,")
    z.writestr("cordon_probe-1.0.dist-info/RECORD", "\n".join(record) + "\n")
print("wheel written")
PY
python3 -m venv venv
echo "venv made: $(ls venv/bin/python venv/bin/pip)"
venv/bin/python -m pip install -q --no-index --no-cache-dir --disable-pip-version-check \
    dist/cordon_probe-1.0-py3-none-any.whl
venv/bin/python -c '
import cordon_probe, importlib.resources, sys
print(cordon_probe.greet())
print("installed in the venv:", cordon_probe.__file__.startswith(sys.prefix))
print("data:", importlib.resources.files("cordon_probe").joinpath("data.txt").read_text(), end="")
'
venv/bin/cordon-probe
venv/bin/python -m pip list --disable-pip-version-check --format=freeze | grep -i cordon
venv/bin/python -m pip uninstall -y -q cordon-probe
venv/bin/python -c 'import cordon_probe' 2>/dev/null || echo "uninstalled"
ls venv/bin | grep -c cordon || true
