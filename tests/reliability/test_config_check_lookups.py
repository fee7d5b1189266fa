"""Issue 36: the config check says when it cannot check an option, instead of skipping it: an unknown backbone
name is an error with the registry's close names, and a registry lookup that fails (the module a dotted type names
raises on import) is reported with its cause, not taken for an unregistered name."""
import inspect

import pytest

import heads  # noqa: F401  (registers the components)
import zoo
from heads.engine.config.check import FACTORY_KEYS, ConfigKeyError, ConfigTypeError, check_config_keys


def segmentor(**backbone) -> dict:
    return dict(model=dict(type='Segmentor', backbone=dict(type='ZooBackbone', **backbone)))


def test_unknown_backbone_name_is_an_error_with_close_names():
    with pytest.raises(ConfigKeyError, match=r"config key model\.backbone\.name: unknown backbone "
                                             r"'vit_tiny_patch16_244'\. did you mean vit_tiny_patch16_224"):
        check_config_keys(segmentor(name='vit_tiny_patch16_244', embed_dim='wide'))


def test_backbone_without_a_name_is_an_error():
    with pytest.raises(ConfigTypeError, match=r"config key model\.backbone\.name: a backbone name .* got None"):
        check_config_keys(segmentor(embed_dim=64))


def test_known_backbone_options_are_still_checked():
    check_config_keys(segmentor(name='vit_tiny_patch16_224', embed_dim=64))
    with pytest.raises(ConfigTypeError, match=r"model\.backbone\.embed_dim"):
        check_config_keys(segmentor(name='vit_tiny_patch16_224', embed_dim='wide'))


def test_a_type_whose_module_fails_to_import_is_reported_with_the_cause(tmp_path, monkeypatch):
    (tmp_path / 'broken_components.py').write_text("raise RuntimeError('broken on import: missing dependency')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigTypeError) as caught:
        check_config_keys(dict(model=dict(type='broken_components.MyHead', channels=8)))
    message = str(caught.value)
    assert 'config key model.type' in message and 'broken on import: missing dependency' in message, message
    assert 'is not a registered type' not in message


def test_the_factory_keys_are_create_backbone_s_named_parameters():
    """Derived, not copied: a keyword create_backbone gains is a factory key (not checked against the class)."""
    params = inspect.signature(zoo.create_backbone).parameters.values()
    assert FACTORY_KEYS == {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    assert {'name', 'pretrained', 'out_indices', 'grad_checkpointing', 'lora'} <= FACTORY_KEYS
    check_config_keys(segmentor(name='vit_tiny_patch16_224', out_indices=[0, 1], grad_checkpointing=True,
                                lora=dict(rank=4)))


def test_backbone_options_have_one_check_that_the_config_check_and_the_factory_report():
    from zoo.option_types import OptionTypeError
    from zoo.registry import get_variant
    problems = get_variant('vit_tiny_patch16_224').option_problems('backbone', {'depth': 'two', 'colour': 1})
    assert problems.owner == 'vit_tiny_patch16_224 (ViTBackbone)' and problems.unknown == ['colour']
    assert problems.wrong == [('depth', "expects int, got 'two' (str)")]
    with pytest.raises(ConfigTypeError, match=r"config key model\.backbone\.depth: vit_tiny_patch16_224 "
                                              r"\(ViTBackbone\) expects int, got 'two' \(str\)"):
        check_config_keys(segmentor(name='vit_tiny_patch16_224', depth='two'))
    check_config_keys(segmentor(name='vit_tiny_patch16_224', colour=1))  # key names: left to the factory
    with pytest.raises(TypeError, match=r"vit_tiny_patch16_224 \(ViTBackbone\) does not accept \['colour'\]"):
        zoo.create_backbone('vit_tiny_patch16_224', colour=1)
    with pytest.raises(OptionTypeError, match=r"vit_tiny_patch16_224 \(ViTBackbone\): option depth expects int"):
        zoo.create_backbone('vit_tiny_patch16_224', depth='two')
