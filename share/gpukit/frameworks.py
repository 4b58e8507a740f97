# gpudoctor's frameworks probe: run by `python3 -c <this file> [framework...]` (compiled into
# gpudoctor from share/gpukit/frameworks.py). For each framework (all, or those named), it checks
# that the module is there before importing it, reads version and GPU facts with every call
# guarded, and says "start"/"done" on a progress line around each, so that a framework whose
# import hangs or kills the interpreter is known by name and the others are still read. The last
# line is one JSON object with everything.
import sys

# "python3 -c" puts the current directory first on sys.path: a json.py or torch.py there would run
# (as root under a Slurm prolog). The check is of the installed packages, so it goes first.
if sys.path and sys.path[0] in ("", "."):
    del sys.path[0]

import importlib.util
import json
import logging
import os
import sys
import warnings

MARK = "@gpukit-frameworks "
NAMES = ["torch", "tensorflow", "jax", "horovod", "mxnet"]


def one_line(text, limit=400):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_text(e):
    return one_line("%s: %s" % (type(e).__name__, e))


def say(event, **fields):
    fields["event"] = event
    sys.stdout.write("\n" + MARK + json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()


def version_text(v):
    if isinstance(v, (tuple, list)):
        return ".".join(str(x) for x in v)
    if isinstance(v, int) and v > 0:
        # NCCL_VERSION_CODE: X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before
        if v >= 20900:
            return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
        return "%d.%d.%d" % (v // 1000, v // 100 % 10, v % 100)
    return v


def has_module(name):
    try:
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False


class Facts(dict):
    def read(self, key, fn):
        # What an old version lacks (AttributeError) is "unknown"; another error keeps its text.
        try:
            value = fn()
        except AttributeError:
            value = "unknown"
        except Exception as e:
            value = "unknown"
            self.setdefault("errors", {})[key] = error_text(e)
        self[key] = value
        return value


class Captured(logging.Handler):
    def __init__(self):
        logging.Handler.__init__(self, logging.WARNING)
        self.messages = []

    def emit(self, record):
        try:
            self.messages.append(record.getMessage())
        except Exception:
            pass


def check_torch(f):
    import torch
    f.read("version", lambda: str(torch.__version__))
    f.read("cuda_build", lambda: torch.version.cuda)
    f.read("hip_build", lambda: getattr(torch.version, "hip", None))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        f.read("cuda_available", lambda: bool(torch.cuda.is_available()))
        f.read("device_count", lambda: int(torch.cuda.device_count()))
    if seen:
        f["cuda_warning"] = one_line(seen[0].message)
    f.read("cudnn_version", lambda: torch.backends.cudnn.version())
    if isinstance(f.get("cuda_build"), str):
        def nccl():
            import torch.cuda.nccl
            return version_text(torch.cuda.nccl.version())
        f.read("nccl_version", nccl)
    f.read("nccl_available", lambda: bool(torch.distributed.is_available() and torch.distributed.is_nccl_available()))
    f.read("mpi_available", lambda: bool(torch.distributed.is_available() and torch.distributed.is_mpi_available()))


def check_tensorflow(f):
    import tensorflow as tf
    f.read("version", lambda: str(tf.__version__))
    f.read("cuda_build", lambda: bool(tf.test.is_built_with_cuda()))
    f.read("cuda_version", lambda: tf.sysconfig.get_build_info().get("cuda_version"))

    def gpus():
        lister = getattr(tf.config, "list_physical_devices", None) or tf.config.experimental.list_physical_devices
        return len(lister("GPU"))
    f.read("device_count", gpus)


def check_jax(f):
    handler = Captured()
    logging.getLogger("jax").addHandler(handler)
    import jax
    f.read("version", lambda: str(jax.__version__))

    def jaxlib_version():
        import jaxlib
        v = getattr(jaxlib, "__version__", None)
        if v is None:
            import jaxlib.version
            v = jaxlib.version.__version__
        return str(v)
    f.read("jaxlib_version", jaxlib_version)
    f["cuda_plugin"] = next((m for m in ("jax_cuda12_plugin", "jax_cuda11_plugin") if has_module(m)), None)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        f.read("backend", lambda: str(jax.default_backend()))
        f.read("platforms", lambda: [str(d.platform) for d in jax.devices()])
    messages = handler.messages + [str(w.message) for w in seen]
    if messages:
        f["cuda_warning"] = one_line(messages[0])


def check_horovod(f):
    import horovod
    f.read("version", lambda: str(horovod.__version__))
    bindings = {}
    for framework in ("torch", "tensorflow", "mxnet"):
        if not has_module(framework):
            continue
        b = Facts()
        try:
            module = importlib.import_module("horovod." + framework)
            b.read("nccl_built", lambda: module.nccl_built())
            b.read("mpi_built", lambda: bool(module.mpi_built()))
            b.read("gloo_built", lambda: bool(module.gloo_built()))
        except BaseException as e:
            b["import_error"] = error_text(e)
        bindings[framework] = b
    f["bindings"] = bindings


def check_mxnet(f):
    import mxnet
    f.read("version", lambda: str(mxnet.__version__))
    f.read("cuda_build", lambda: bool(mxnet.runtime.Features().is_enabled("CUDA")))

    def gpus():
        place = getattr(mxnet, "context", None) or mxnet.device
        return int(place.num_gpus())
    f.read("device_count", gpus)


CHECKS = {"torch": check_torch, "tensorflow": check_tensorflow, "jax": check_jax,
          "horovod": check_horovod, "mxnet": check_mxnet}


def main():
    wanted = [n for n in sys.argv[1:] if n in CHECKS] or NAMES
    out = {"python_executable": sys.executable,
           "python_version": "%d.%d.%d" % tuple(sys.version_info[:3]),
           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
           "frameworks": {}}
    say("python", **out)
    for name in wanted:
        f = Facts()
        if not has_module(name):
            f["installed"] = False
        else:
            f["installed"] = True
            say("start", framework=name)
            try:
                CHECKS[name](f)
            except ModuleNotFoundError as e:
                if e.name == name:
                    f["installed"] = False
                else:
                    f["import_error"] = error_text(e)
            except BaseException as e:
                f["import_error"] = error_text(e)
        say("done", framework=name, facts=f)
        out["frameworks"][name] = f
    sys.stdout.write("\n" + json.dumps(out, default=str) + "\n")
    sys.stdout.flush()


main()
