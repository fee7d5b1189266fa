"""README's overview tables, made from the registries: backbone families (``zoo``'s registered names grouped by
the family file that registered them, with their count), heads and tasks (the parts ``heads``' registries hold).

``python tools/list_models.py --overview`` prints them; ``--overview --write README.md`` replaces the block between
:data:`BEGIN` and :data:`END` there, and ``tests/project/test_readme_overview.py`` fails while README's block differs
from what the registries give. Every registered model part, dataset and metric must be named by exactly one row
(:func:`unplaced_parts`): a new head or task cannot be registered without a row saying what it is.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

BEGIN = ('<!-- overview: made from the registries by `python tools/list_models.py --overview --write THIS_FILE`; '
         'do not edit by hand -->')
END = '<!-- end of overview -->'

#: The families' names as the papers write them, by the file that registers their variants.
FAMILY_NAMES = {
    'vit': 'ViT', 'deit': 'DeiT', 'vit_hybrid': 'ViT-hybrid (BiT ResNet stem)', 'vit_rope': 'ViT with 2-D RoPE',
    'dinov2': 'DINOv2', 'dinov3': 'DINOv3', 'clip': 'CLIP image towers', 'siglip': 'SigLIP / SigLIP 2',
    'eva02': 'EVA-02 / EVA-02 CLIP', 'pe': 'Perception Encoder', 'aimv2': 'AIMv2', 'radio': 'C-RADIO',
    'internvit': 'InternViT-300M', 'naflex': 'NaFlex ViT', 'naflex_radio': 'C-RADIO as NaFlex ViT', 'cvt': 'CvT',
    'coatnet': 'CoAtNet', 'crossvit': 'CrossViT', 'swin': 'Swin V1 / V2', 'pit': 'PiT', 'levit': 'LeViT',
}

#: Heads: (name, the registered parts that make it, what it predicts).
HEADS = [
    ('DPT', ('DPTNeck', 'DPTSegHead', 'DPTDepthHead'), 'segmentation, depth'),
    ('Depth Anything V2', ('DepthAnythingNeck', 'DepthAnythingHead'), 'relative and metric depth'),
    ('Video Depth Anything', ('VideoDepthAnythingNeck', 'VideoDepthEstimator'),
     'relative and metric depth of video clips'),
    ('MoGe-2', ('ConvStack', 'MoGeHead'), 'metric point maps, normals, validity mask and scale'),
    ('UperNet', ('UPerHead', 'FCNHead', 'PyramidLevels'), 'segmentation'),
    ('Mask2Former', ('Mask2Former', 'Mask2FormerPixelDecoder', 'Mask2FormerTransformerDecoder'),
     'semantic, instance, panoptic segmentation'),
    ('EoMT', ('EoMT',), 'semantic, instance, panoptic segmentation'),
    ('Faster / Mask R-CNN (torchvision)', ('TorchvisionDetector', 'SimpleFeaturePyramid', 'HierarchicalFPN'),
     'detection, instance masks'),
]

#: Tasks: (task, task models, datasets, metrics), each name a registered part.
TASKS = [
    ('semantic segmentation', ('Segmentor',),
     ('ADE20KDataset', 'CamVidDataset', 'CocoSegDataset', 'FolderSegDataset', 'SyntheticScenes'), ('IoUMetric',)),
    ('depth', ('DepthEstimator',), ('RGBDDepthDataset', 'RGBDFolderDataset'), ('DepthMetric',)),
    ('video depth', ('VideoDepthEstimator',), ('VideoClipDataset',), ('DepthMetric',)),
    ('metric point maps (geometry)', ('MoGe2',), (), ()),
    ('classification', ('ImageClassifier',), ('ImageFolderDataset',), ('AccuracyMetric',)),
    ('panoptic / instance segmentation', ('Mask2Former', 'EoMT'), ('CamVidPanopticDataset', 'CocoPanopticDataset'),
     ('PanopticQualityMetric', 'MaskAPMetric')),
    ('detection, and detection features for detectron2 / mmdet', ('TorchvisionDetector', 'ZooMMDetBackbone'),
     ('CocoDetectionDataset',), ('CocoDetectionMetric',)),
    ('MAE pre-training', ('MAEPretrainer',), (), ()),
]

#: Registered model parts that are neither a head nor a task model: the backbone wrapper, losses, preprocessors.
OTHER_PARTS = {'ZooBackbone', 'CrossEntropyLoss', 'ScaleShiftInvariantLoss', 'SiLogLoss', 'MaskClassificationLoss',
               'VideoDepthLoss', 'ClassificationPreprocessor', 'DensePreprocessor'}


def families() -> list[dict]:
    """One row per family file: its name, variant count, first and last registered name (sorted), file."""
    import zoo
    from zoo.registry import get_variant
    grouped = defaultdict(list)
    for name in zoo.list_backbones():
        grouped[get_variant(name).family].append(name)
    rows = []
    for module, names in sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0])):
        short = module.rsplit('.', 1)[-1]
        if short not in FAMILY_NAMES:
            raise KeyError(f"backbone family {module} ({len(names)} names, e.g. {names[0]}) has no name in "
                           f"tools/lab/overview.py's FAMILY_NAMES: add one")
        rows.append({'family': FAMILY_NAMES[short], 'variants': len(names),
                     'names': f'`{names[0]}`' + (f' ... `{names[-1]}`' if len(names) > 1 else ''),
                     'file': f"`{module.replace('.', '/')}.py`"})
    return rows


def registered() -> dict[str, set[str]]:
    """The names ``heads``' model, dataset and metric registries hold."""
    import heads.parts  # noqa: F401  (registers every part)
    from heads.registry import DATASETS, METRICS, MODELS
    return {'model': set(MODELS.module_dict), 'dataset': set(DATASETS.module_dict), 'metric': set(METRICS.module_dict)}


def unplaced_parts() -> dict[str, list[str]]:
    """Registered parts no row names, and names rows give that nothing registers (both empty when they agree)."""
    held = registered()
    named = {'model': {p for _, parts, _ in HEADS for p in parts} | {m for _, ms, _, _ in TASKS for m in ms}
             | OTHER_PARTS,
             'dataset': {d for _, _, ds, _ in TASKS for d in ds}, 'metric': {m for *_, ms in TASKS for m in ms}}
    problems = {}
    for kind in held:
        if missing := sorted(held[kind] - named[kind]):
            problems[f'registered {kind}s without a row'] = missing
        if unknown := sorted(named[kind] - held[kind]):
            problems[f'{kind}s named but not registered'] = unknown
    return problems


def code(names) -> str:
    return ', '.join(f'`{n}`' for n in names) or '-'


def overview() -> str:
    """The three Markdown tables, between :data:`BEGIN` and :data:`END`."""
    if problems := unplaced_parts():
        raise KeyError(f"tools/lab/overview.py's HEADS / TASKS / OTHER_PARTS and heads' registries differ: {problems}")
    rows = families()
    lines = [BEGIN, '', f'**{len(rows)} backbone families, {sum(r["variants"] for r in rows)} registered names** '
             '(`python tools/list_models.py` lists each with its parameters and maps):', '',
             '| family | names | e.g. | file |', '|---|---|---|---|']
    lines += [f"| {r['family']} | {r['variants']} | {r['names']} | {r['file']} |" for r in rows]
    lines += ['', '**Heads** (any backbone of the zoo under each):', '', '| head | registered parts | predicts |',
              '|---|---|---|']
    lines += [f'| {name} | {code(parts)} | {what} |' for name, parts, what in HEADS]
    lines += ['', '**Tasks:**', '', '| task | model | datasets | metrics |', '|---|---|---|---|']
    lines += [f'| {task} | {code(models)} | {code(data)} | {code(metrics)} |' for task, models, data, metrics in TASKS]
    return '\n'.join([*lines, '', END]) + '\n'


def replace_block(text: str, block: str, where: str = 'README.md') -> str:
    """``text`` with its overview block (from :data:`BEGIN` to :data:`END`) replaced by ``block``."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{where} has no overview block: put the lines {BEGIN!r} and {END!r} where it goes")
    start, end = text.index(BEGIN), text.index(END) + len(END) + 1
    return text[:start] + block + text[end:]


def write(path: str | Path) -> bool:
    """Write the overview into ``path``'s block; whether the file changed."""
    path = Path(path)
    text = path.read_text()
    new = replace_block(text, overview(), str(path))
    if new != text:
        path.write_text(new)
    return new != text
