"""transformers ``save_pretrained`` folders as this project's task models: one loader, the model chosen by
``config.json``'s ``model_type`` (:data:`KINDS`).

Each kind is a pair of functions from its module: the model config from the (type-checked) ``config.json``, and the
converted weights from the folder's state dict given the built model. The loader builds the model, converts, loads
strictly in this project's layout (a key missing or left over is an error naming the folder) and returns it in eval
mode with ``hf_model_config`` (the model config it was built from)."""
from __future__ import annotations

from importlib import import_module
from pathlib import Path

from zoo.weights import load_pretrained, read_state_dict
from zoo.weights.io import check_local
from zoo.weights.layout_error import CheckpointLayoutError

from ..registry import MODELS
from .config import HFConfigError, read_config_json

#: model_type -> (module under heads.hf, its config function, its state function (state, model) -> state);
#: any other model_type is read as a DPT config (which refuses what it is not).
KINDS = {
    'dpt': ('dpt', 'model_config_from_hf', 'dpt_state_from_hf'),
    'depth_anything': ('depth_anything', 'depth_anything_config_from_hf', 'depth_anything_state_from_hf'),
    'upernet': ('upernet', 'upernet_config_from_hf', 'upernet_state_from_hf'),
    'mask2former': ('mask2former', 'mask2former_config_from_hf', 'convert_mask2former_state'),
    'eomt': ('eomt', 'eomt_config_from_hf', 'eomt_state_from_hf'),
    'eomt_dinov3': ('eomt', 'eomt_config_from_hf', 'eomt_dinov3_state_from_hf'),
}


def from_pretrained_hf(folder):
    """Our task model with the weights of a transformers ``save_pretrained`` folder (eval mode): DPT (ViT or
    DPT-Hybrid) and Depth Anything as Segmentor / DepthEstimator, UperNet (Swin) as a Segmentor, Mask2Former (Swin)
    and EoMT (DINOv2-like or DINOv3) as mask-classification models."""
    check_local(folder)  # an empty path is no folder (Path('') would read the current one)
    folder = Path(folder)
    config_file = folder / 'config.json'
    if not config_file.is_file():
        raise FileNotFoundError(f"{folder} has no config.json: expected a transformers save_pretrained folder")
    config = read_config_json(config_file)
    if not isinstance(config.get('model_type'), (str, type(None))):
        raise HFConfigError(f"{config_file}: field 'model_type' must be a string naming the model (one of "
                            f"{', '.join(map(repr, KINDS))}), got {type(config['model_type']).__name__} "
                            f"{str(config['model_type'])[:60]}")
    module, config_fn, state_fn = KINDS.get(config.get('model_type'), KINDS['dpt'])
    module = import_module(f'heads.hf.{module}')
    model_cfg = getattr(module, config_fn)(config, config_file)
    model = MODELS.build(model_cfg)
    try:
        state = getattr(module, state_fn)(read_state_dict(folder), model)
    except CheckpointLayoutError as err:
        raise err.in_file(folder) from None
    load_pretrained(model, state, format='zoo', name=str(folder), layout=f"transformers {config.get('model_type')}")
    model.hf_model_config = model_cfg
    return model.eval()
