# find-cudnn.sh - sourced by gpu-check.sh and bench_gpu.sh: exports
# TITAN_CUDNN_LIB, the libcudnn.so.9 that TITAN_CUDA_ATTENTION=cudnn opens
# (kernels/attention_cudnn.cu), unless it is set already or the dynamic
# linker finds the library by itself (the CUDA backend's own directory, its
# cache). GPU images often have cuDNN only inside PyTorch's wheels
# (site-packages/nvidia/cudnn/lib). Sets nothing when there is none.
if [ -z "${TITAN_CUDNN_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 ' &&
   [ ! -e "${CUDA_HOME:-/usr/local/cuda}/lib64/libcudnn.so.9" ]; then
    for find_cudnn_dir in /opt /usr/local /usr/lib "$HOME"; do
        find_cudnn_lib=$(find "$find_cudnn_dir" -name 'libcudnn.so.9' 2>/dev/null | head -n 1)
        if [ -n "$find_cudnn_lib" ]; then
            export TITAN_CUDNN_LIB="$find_cudnn_lib"
            break
        fi
    done
    unset find_cudnn_dir find_cudnn_lib
fi
