# Sourced by the gpu/ scripts: installs ExecuTorch $ET (default 1.5.1), carried
# as a wheel in .whl/et<ET without dots>/ with the wheels of .whl/deps/, into
# /tmp/site-$ET, never into the machine's own Python, and puts it first on
# PYTHONPATH; creates the output folder $out (default gpu-out).
ET="${ET:-1.5.1}"
out="${OUT:-gpu-out}"
mkdir -p "$out"
site="/tmp/site-$ET"
# Installed once: jobs that run side by side (gpu/series_h200.sh) share it.
if [[ ! -f "$site/.installed" ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$site" .whl/et"${ET//./}"/*.whl .whl/deps/*.whl || exit
    touch "$site/.installed"
fi
export PYTHONPATH="$site"
