# Sourced by record.sh and paired.sh: where baton-bench and the shared benchmarks are, and
# the oneDNN-only chains (shared/bench/dnnl_limit) built into $limit.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
root=$(cd "$here/.." && pwd)
shared=${SHARED:-$root/../shared/bench}
bench=${BATON_BENCH:-$root/build/bin/baton-bench}
limit=${DNNL_LIMIT_BUILD:-/tmp/dnnl_limit}

mkdir -p "$limit"
g++ -std=c++17 -O3 -march=native -o "$limit/resnet18" "$shared/dnnl_limit/resnet18.cpp" -ldnnl
g++ -std=c++17 -O3 -march=native -o "$limit/cnn_train" "$shared/dnnl_limit/cnn_train.cpp" -ldnnl
g++ -std=c++17 -O2 -march=native -fopenmp -o "$limit/peak" "$shared/dnnl_limit/peak.cpp"
