# gpudoctor fit --cuda-context measure: run by `python3 -c <this file> FRAMEWORK` (compiled into
# gpudoctor from share/gpukit/cuda_context.py) with CUDA_VISIBLE_DEVICES naming one GPU. It makes
# the framework start CUDA on that GPU and run a small training step, in fp32 and in 16-bit, so
# that the kernels a training process loads (lazily since CUDA 11.7) are loaded; prints how much
# of what it holds is the framework's own allocator pool (GPUKIT_RESERVED_BYTES=<n>); and holds
# everything for a second while gpudoctor samples NVML. The context is what the GPU's used memory
# rose by, less that pool.
import sys

# "python3 -c" puts the current directory first on sys.path: a torch.py there would run instead.
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]

import contextlib
import os
import time


def pytorch():
    import torch

    dev = "cuda"
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.LayerNorm(256), torch.nn.GELU(), torch.nn.Linear(256, 16)
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(8, 64, device=dev)
    y = torch.randint(0, 16, (8,), device=dev)
    # Since PyTorch 2.2 is_bf16_supported() counts bf16 emulated on older GPUs (V100, T4), which a
    # job there does not run; 2.4 added the argument to leave emulation out. Native bf16 is
    # compute capability 8 on (Ampere).
    try:
        bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:
        bf16 = bool(torch.version.hip) or torch.cuda.get_device_capability()[0] >= 8
    half = torch.bfloat16 if bf16 else torch.float16
    for autocast in (contextlib.nullcontext(), torch.autocast("cuda", dtype=half)):
        with autocast:
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    torch.cuda.synchronize()
    return torch.cuda.memory_reserved()


def tensorflow():
    import tensorflow as tf

    gpus = tf.config.experimental.list_physical_devices("GPU")
    if not gpus:  # it would run the step on the CPU without a word
        sys.exit("TensorFlow sees no GPU (CUDA_VISIBLE_DEVICES=%s)" % os.environ.get("CUDA_VISIBLE_DEVICES"))
    for gpu in gpus:
        tf.config.experimental.set_memory_growth(gpu, True)
    with tf.device("/GPU:0"):
        model = tf.keras.Sequential(
            [tf.keras.Input((64,)), tf.keras.layers.Dense(256, activation="relu"), tf.keras.layers.Dense(16)]
        )
        model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.train_on_batch(tf.random.normal((8, 64)), tf.random.uniform((8,), 0, 16, dtype=tf.int32))
    # Its allocator's pool, grown for this small step, is not told apart: a few MiB.
    return 0


FRAMEWORKS = {"pytorch": pytorch, "tensorflow": tensorflow}

reserved = FRAMEWORKS[sys.argv[1]]()
print("GPUKIT_RESERVED_BYTES=%d" % reserved, flush=True)
time.sleep(1.0)
