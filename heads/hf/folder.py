"""transformers ``save_pretrained`` folders as this project's task models: one loader, the model chosen by
``config.json``'s ``model_type`` (:data:`KINDS`).

Each kind's module gives the model config from the (type-checked) ``config.json``; the folder's weights are in the
layout of a row of :data:`heads.layouts.table.LAYOUTS` (detected by the same ``model_type``), which converts them.
The loader builds the model, converts, loads strictly in this project's layout (a key missing or left over is an
error naming the folder) and returns it in eval mode with ``hf_model_config`` (the model config it was built from)."""
from __future__ import annotations

from importlib import import_module
from pathlib import Path

from zoo.weights import load_pretrained, read_state_dict
from zoo.weights.io import check_local

from ..layouts.detect import Checkpoint, convert_checkpoint
from ..layouts.table import FOLDERS
from ..registry import MODELS
from .config import HFConfigError, read_config_json

#: model_type -> (module under heads.hf, its config function); any other model_type is read as a DPT config (which
#: refuses what it is not). The weights' layout: the row of heads.layouts.table.FOLDERS of the same model_type.
KINDS = {
    'dpt': ('dpt', 'model_config_from_hf'),
    'depth_anything': ('depth_anything', 'depth_anything_config_from_hf'),
    'upernet': ('upernet', 'upernet_config_from_hf'),
    'mask2former': ('mask2former', 'mask2former_config_from_hf'),
    'eomt': ('eomt', 'eomt_config_from_hf'),
    'eomt_dinov3': ('eomt', 'eomt_config_from_hf'),
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
    module, config_fn = KINDS.get(config.get('model_type'), KINDS['dpt'])
    model_cfg = getattr(import_module(f'heads.hf.{module}'), config_fn)(config, config_file)
    model = MODELS.build(model_cfg)
    state, layout = convert_checkpoint(Checkpoint(read_state_dict(folder), model, str(folder), config), FOLDERS)
    load_pretrained(model, state, format='zoo', name=str(folder), layout=layout.name)
    model.hf_model_config = model_cfg
    return model.eval()
