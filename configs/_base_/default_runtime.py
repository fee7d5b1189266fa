# Runtime shared by every experiment: this project's registries, logging, checkpoints, visualisation.
default_scope = 'heads'
env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='nccl'))
log_processor = dict(by_epoch=False)
log_level = 'INFO'
load_from = None
resume = False
default_hooks = dict(
    timer=dict(type='EtaTimerHook'),  # mmengine's IterTimerHook with an ETA from recent iterations + validations left
    # mmengine's LoggerHook, plus a run summary and iterations 1, 2, 5, 10, 20 before the first interval
    logger=dict(type='ProgressLoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=16000, max_keep_ckpts=3),
    sampler_seed=dict(type='DistSamplerSeedHook'),
)
# SafeCheckpointHook: checkpoints load with torch.load(weights_only=True), so --resume works on torch >= 2.6.
custom_hooks = [dict(type='SafeCheckpointHook'), dict(type='PredictionVisualizationHook')]
vis_backends = [dict(type='LocalVisBackend'), dict(type='TensorboardVisBackend')]
visualizer = dict(type='Visualizer', vis_backends=vis_backends)
randomness = dict(seed=0)
