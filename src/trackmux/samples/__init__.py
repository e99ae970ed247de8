"""The rollout ledger (issue 23, docs/samples.md): samples as first-class data.

``Run.log_samples`` converts a batch at the door (core/values/samples.py) into one
``SamplesEvent`` that the spool keeps whole (core/spool/samplepack.py). This package
reads it back (:mod:`.read`), filters it (:mod:`.where`) and projects it for backends
(:mod:`.projection`); the report's sample browser and ``trackmux samples`` use them.
"""
