"""``tune`` on a Dask cluster: one task per config, the program sent once.

* The program (function or ``tp.Module`` with its weights, cloudpickled, with the args) is scattered once
  and broadcast to every worker; each task gets that one future, and a worker unpickles it once
  (``tune_task.load_program``). An importable ``"module:attr"`` path travels as text instead.
* The fp32 reference (inputs + outputs) is one task; its result is broadcast the same way.
* Workers with a ``GPU`` resource (``dask worker --resources GPU=1``, ``LocalCluster(resources={"GPU": 1})``)
  take one config at a time per GPU; elsewhere ``tune_task.TIMING_LOCK`` keeps one timing per process.
* Cancel: a ``distributed.Event`` the tasks check between steps, and the futures not done are cancelled.

Imported only by ``tune(client=...)``: Dask stays out of ``import tripy_lab`` and the lab's default paths.
"""

from __future__ import annotations

import threading

import cloudpickle
from distributed import Event, as_completed

from tripy_lab.core.cache import digest
from tripy_lab.lab import tune_task


def describe(client) -> str:
    try:
        n = len(client.scheduler_info().get("workers", {}))
    except Exception:  # a client that lost its scheduler: the sweep's own error says so
        n = "?"
    return f"Dask: {n} workers at {getattr(client.scheduler, 'address', client)}"


def gpu_resources(client) -> dict | None:
    """``{"GPU": 1}`` when the cluster's workers advertise GPUs, else None."""
    workers = client.scheduler_info().get("workers", {})
    return {"GPU": 1} if any(w.get("resources", {}).get("GPU") for w in workers.values()) else None


def reference_task(token: str, payload, inputs, engine: str) -> dict:
    tune_task.setup_worker()
    func, args = tune_task.load_program(token, payload)
    return tune_task.reference(func, args, inputs, engine=engine)


def config_task(index: int, config: dict, token: str, payload, ref: dict, gate: dict, timing_opts: dict,
                cancel: str) -> dict:
    program = tune_task.load_program(token, payload)
    return tune_task.run_config(index, config, program, ref, gate, timing_opts, cancel)


def payload_of(program: tuple, path: str | None) -> tuple:
    func, args = program
    if path is not None:
        return ("path", path, args)
    return ("pickle", cloudpickle.dumps((func, args)), None)


def start(run, client, path: str | None, inputs, timing_opts: dict, engine: str) -> None:
    """Submit the sweep and stream rows into ``run`` from a background thread."""
    state: dict = {"futures": []}
    event = Event(run.token, client=client)

    def cancel() -> None:
        try:
            event.set()
            client.cancel([f for f in state["futures"] if not f.done()])
        except Exception:  # a closed client: nothing left to stop
            pass

    run._cancel_hooks.append(cancel)
    threading.Thread(target=_drive, args=(run, client, path, inputs, timing_opts, engine, state), daemon=True,
                     name="tripy-lab-tune-dask").start()


def _drive(run, client, path, inputs, timing_opts, engine, state) -> None:
    try:
        payload = payload_of(run.program, path)
        token = digest(payload[0], payload[1])
        program = client.scatter(payload, broadcast=True, hash=False)
        ref_future = client.submit(reference_task, token, program, inputs, engine, pure=False)
        state["futures"] = [ref_future]
        try:
            ref = ref_future.result()
        except Exception as exc:
            run.error = "cancelled" if run.cancelled else f"reference: {getattr(exc, 'summary', None) or exc}"
            run.fail_remaining(run.error)
            return
        run.reference_shape = ref["shape"]
        ref_scattered = client.scatter(ref, broadcast=True, hash=False)
        resources = gpu_resources(client)
        futures = []
        for i, config in enumerate(run.configs):
            if run.cancelled:
                break
            futures.append(client.submit(config_task, i, config, token, program, ref_scattered, run.gate, timing_opts,
                                         run.token, pure=False, resources=resources,
                                         key=f"tripy-lab-tune-{i}-{run.token[-12:]}"))
            state["futures"] = futures
        if run.cancelled:
            client.cancel(futures)
        for future in as_completed(futures):
            if future.status == "finished":
                run.add(future.result())
            elif future.status == "error":
                exc = future.exception()
                i = futures.index(future)
                run.add({"index": i, **run.configs[i], "worker": "", "build_s": float("nan"), "passed": False,
                         "error": f"task: {getattr(exc, 'summary', None) or f'{type(exc).__name__}: {exc}'}",
                         "trtexec": ""})
        run.fail_remaining("cancelled")
    except Exception as exc:  # the cluster went away: the rows not done say why
        run.error = f"Dask: {type(exc).__name__}: {exc}"
        run.fail_remaining("cancelled" if run.cancelled else run.error)
    finally:
        try:
            client.cancel(state["futures"])  # releases the scattered program and reference with them
        except Exception:
            pass
        run.finish()
