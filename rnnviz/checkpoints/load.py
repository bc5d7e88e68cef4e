"""``read_checkpoint(path) -> Checkpoint``: a Hugging Face folder or a PyTorch state dict, every
header checked against what its family expects before a byte of data is read.

The order of the checks, so that nothing half-loaded is ever used:

1. ``config.json`` (at most :data:`MAX_CONFIG_BYTES`), its ``model_type`` and sizes (the
   family's ``parse``); for a bare state dict, the sizes from its tensors' names and shapes;
2. the weight files' headers (``.safetensors``, the sharded index, or ``torch.save`` zips);
3. every tensor the family uses is present (or tied to one that is) with the shape the sizes
   give, and their bytes fit the cap;
4. only then the data, into arrays allocated once.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from rnnviz.checkpoints import safetensors, torchfile
from rnnviz.checkpoints.record import Checkpoint, CheckpointError, Family
from rnnviz.checkpoints.registry import FAMILIES
from rnnviz.checkpoints.tensors import DTYPES, TensorInfo, read_tensor
from rnnviz.dataset.budget import size_text

#: The largest ``config.json`` or sharded index read.
MAX_CONFIG_BYTES = 2**20
#: The most bytes of weights a checkpoint may hold, in the dtype asked for.
MAX_BYTES = 16 * 2**30
#: Suffixes of the files ``torch.save`` writes.
TORCH_SUFFIXES = (".pt", ".pth", ".bin")
#: A state dict file's suffixes (``torch.save``'s and safetensors').
STATE_DICT_SUFFIXES = (*TORCH_SUFFIXES, ".safetensors")


def _json(path: Path) -> dict:
    """A small JSON object from ``path``, its size checked before it is read."""
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise CheckpointError(str(path), f"{path.stat().st_size} bytes; allowed: at most {MAX_CONFIG_BYTES}")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(str(path), f"is not JSON ({err.__class__.__name__})") from None
    if not isinstance(value, dict):
        raise CheckpointError(str(path), "is not a JSON object")
    return value


def _headers(files: list[Path]) -> dict[str, TensorInfo]:
    """The headers of every weight file, merged; a name in two files is refused."""
    infos: dict[str, TensorInfo] = {}
    for file in files:
        reader = torchfile if file.suffix in TORCH_SUFFIXES else safetensors
        for name, info in reader.read_header(str(file)).items():
            if name in infos:
                raise CheckpointError(str(file), f"tensor {name!r} is also in {infos[name].file}")
            infos[name] = info
    return infos


def _shard_files(folder: Path, index: Path) -> list[Path]:
    """The shards a ``model.safetensors.index.json`` names, each a file in ``folder``."""
    weight_map = _json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(str(index), "has no weight_map of tensor names to shard files")
    names = sorted(set(weight_map.values()))
    for name in names:
        if not isinstance(name, str) or Path(name).name != name or not (folder / name).is_file():
            raise CheckpointError(str(index), f"names shard {name!r}; allowed: a file beside it")
    return [folder / n for n in names]


def _weight_files(folder: Path) -> list[Path]:
    """A Hugging Face folder's weight files: the sharded index's, else one safetensors or
    ``pytorch_model.bin``."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return _shard_files(folder, index)
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return [folder / name]
    found = sorted(folder.glob("*.safetensors"))
    if len(found) == 1:
        return found
    raise CheckpointError(
        str(folder), "holds no model.safetensors, sharded index or pytorch_model.bin (one weight file)"
    )


def _family(model_type: object, source: str) -> Family:
    if model_type not in FAMILIES:
        allowed = ", ".join(sorted(t for t, f in FAMILIES.items() if f.from_shapes is None))
        raise CheckpointError(source, f"model_type is {model_type!r}; allowed: {allowed}")
    return FAMILIES[model_type]


def _check(family: Family, spec, infos: Mapping[str, TensorInfo], source: str, dtype: np.dtype, cap: int):
    """Every tensor the family uses, present or tied, with its expected shape; the total
    bytes within ``cap``. Returns the names to read and the tied names to fill."""
    expected, tied = family.tensors(spec), family.tied(spec)
    read, fill = [], {}
    for name, shape in expected.items():
        if name in infos:
            if infos[name].shape != tuple(shape):
                raise CheckpointError(
                    infos[name].file, f"tensor {name!r} is {list(infos[name].shape)}; expected {list(shape)}"
                )
            read.append(name)
        elif name in tied and tied[name] in infos:
            fill[name] = tied[name]
        else:
            raise CheckpointError(source, f"tensor {name!r} {list(shape)} is missing")
    nbytes = sum(math.prod(infos[n].shape) * dtype.itemsize for n in read)
    if nbytes > cap:
        raise CheckpointError(
            source, f"{size_text(nbytes)} of weights as {dtype.name}; allowed: at most {size_text(cap)}"
        )
    return read, fill


def _read(model_type, family, spec, infos, source, dtype, cap, tokenizer=None) -> Checkpoint:
    read, fill = _check(family, spec, infos, source, dtype, cap)
    tensors = {name: read_tensor(infos[name], dtype) for name in read}
    tensors |= {name: tensors[src] for name, src in fill.items()}
    return Checkpoint(model_type, spec, tensors, source, tokenizer)


def _folder(folder: Path, dtype: np.dtype, cap: int) -> Checkpoint:
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise CheckpointError(str(folder), "has no config.json; allowed: a Hugging Face model folder")
    config = _json(config_path)
    family = _family(config.get("model_type"), str(config_path))
    spec = family.parse(config, str(config_path))
    infos = _headers(_weight_files(folder))
    tokenizer = folder / "tokenizer.json"
    tok = str(tokenizer) if tokenizer.is_file() else None
    return _read(config["model_type"], family, spec, infos, str(folder), dtype, cap, tok)


def _state_dict(file: Path, dtype: np.dtype, cap: int) -> Checkpoint:
    if file.suffix not in STATE_DICT_SUFFIXES:
        raise CheckpointError(
            str(file), f"has suffix {file.suffix!r}; allowed: .safetensors, {', '.join(TORCH_SUFFIXES)}"
        )
    infos = _headers([file])
    shapes = {name: info.shape for name, info in infos.items()}
    readers = [f for t, f in FAMILIES.items() if f.from_shapes is not None and t == f.model_types[0]]
    if len(readers) != 1:  # a second reader of bare state dicts would need a rule to choose
        raise CheckpointError(str(file), "no single family reads a bare state dict")
    spec = readers[0].from_shapes(shapes, str(file))
    return _read(spec.model_type, readers[0], spec, infos, str(file), dtype, cap)


def read_checkpoint(
    path: str | os.PathLike, dtype: str = "float32", max_bytes: int = MAX_BYTES
) -> Checkpoint:
    """A checkpoint read whole, after every header has been checked.

    Args:
        path: a Hugging Face model folder (``config.json`` and ``model.safetensors``, a sharded
            index, or ``pytorch_model.bin``), or a PyTorch ``nn.LSTM``/``nn.GRU`` state dict
            file (``.safetensors``, or ``.pt``/``.pth``/``.bin`` from ``torch.save``).
        dtype: ``"float32"`` or ``"bfloat16"``, the dtype every float tensor is handed on in.
        max_bytes: the most bytes of weights, in ``dtype``, that may be read.

    Returns:
        The :class:`~rnnviz.checkpoints.record.Checkpoint`.

    Raises:
        CheckpointError: naming the file and what was wrong, and what was expected.
    """
    if dtype not in DTYPES:
        raise CheckpointError(str(path), f"dtype {dtype!r} asked for; allowed: {', '.join(DTYPES)}")
    path = Path(path)
    if path.is_dir():
        return _folder(path, DTYPES[dtype], max_bytes)
    if path.is_file():
        if path.suffix == ".safetensors" and (path.parent / "config.json").is_file():
            return _folder(path.parent, DTYPES[dtype], max_bytes)
        return _state_dict(path, DTYPES[dtype], max_bytes)
    raise CheckpointError(str(path), "does not exist; allowed: a model folder or a state dict file")
