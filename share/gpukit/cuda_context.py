# gpudoctor fit --cuda-context measure: run by `python3 -c <this file> FRAMEWORK` (compiled into
# gpudoctor from share/gpukit/cuda_context.py) with CUDA_VISIBLE_DEVICES naming one GPU. It makes
# the framework start CUDA on that GPU as a training process does (its context and the kernels it
# loads with it), prints how much of what it holds is the framework's own allocator pool, and
# holds everything for a second while gpudoctor reads NVML; the context is what the GPU's used
# memory rose by, less that pool.
import sys

# "python3 -c" puts the current directory first on sys.path: a torch.py there would run instead.
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]

import time


def pytorch():
    import torch

    x = torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    del x
    return torch.cuda.memory_reserved()


def tensorflow():
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    with tf.device("/GPU:0"):
        tf.ones((1,)).numpy()
    # Its allocator's pool, grown for one tensor, is not told apart: a few MiB at most.
    return 0


FRAMEWORKS = {"pytorch": pytorch, "tensorflow": tensorflow}

reserved = FRAMEWORKS[sys.argv[1]]()
print("GPUKIT_RESERVED_BYTES=%d" % reserved, flush=True)
time.sleep(1.0)
