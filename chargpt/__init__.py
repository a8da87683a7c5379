"""What trains, evaluates and runs the recipes of a chargpt model, under one name so that an installed wheel adds no
generic top-level package: `chargpt.training` (the one Accelerate loop both training scripts share),
`chargpt.evaluation` (the metric, answering files of questions, confidence, chargpt-ask) and `chargpt.recipes` (the
named recipes). The model itself is `modeling_chargpt` and its data `data_scripts`, as the design card names them.
"""
