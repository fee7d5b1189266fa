# DPT ViT-B/16 metric depth on 7-Scenes (kitchen), short schedule.
_base_ = ['_base_/models/dpt_vit-b16_depth.py', '_base_/datasets/seven_scenes.py', '_base_/schedules/schedule_short.py',
          '_base_/default_runtime.py']
