# Sourced by gpu/run.sh and gpu/check.sh: installs the wheels carried in .whl/
# into /tmp/site, never into the machine's own Python, and puts it on
# PYTHONPATH; creates the output folder $out (default gpu-out).
out="${OUT:-gpu-out}"
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl || exit
export PYTHONPATH=/tmp/site
