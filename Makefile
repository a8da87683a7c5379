# Entry points; each installs what it needs into .venv.
DATA ?= ../shared/data
RECIPE ?= reference
# `make best` runs `make recite`: that nested make prints no "Entering directory" lines.
MAKEFLAGS += --no-print-directory
OUT ?= out/$(RECIPE)

.PHONY: demo test reproduce recite best lint help

demo:            ## tiny pipeline on the synthetic corpus (minutes on a CPU)
	bash scripts/demo.sh

test:            ## what CI runs: fresh venv, install, ruff, pytest
	bash .ci/run

reproduce:       ## the assignment: make reproduce DATA=dir [RECIPE=reference|light|demo|NAME of chargpt/recipes/] [SYNTH=1] [SEEDS=0,1,2] [FAST_PATH=off] [STACK=1] [RESUME=1: go on after a stop]
	. .venv/bin/activate && python -m chargpt.recipes.reproduce --data_dir $(DATA) --out_dir $(OUT) \
		--recipe $(RECIPE) --seeds $(or $(SEEDS),0) $(if $(SYNTH),--synthesizer,) --fast_path $(or $(FAST_PATH),auto) \
		$(if $(STACK),--stack_seeds,) $(if $(RESUME),--resume,)

recite:          ## a recipe of chargpt/recipes/ that chooses its finetuning rate on held-out questions, by default recite-cpu (4 x 128, 76 epochs; docs/results-recitation.md): make recite DATA=dir [RECIPE=recite-cpu|best|faithful-recite] [SEEDS=0,1,2] [VARIANT=learned] [EPOCHS=150] [N_EMBD=256] [SPAN=1 [CONTINUE=1]] [CHOOSE=1] [RESUME=1]
	. .venv/bin/activate && python -m chargpt.recipes.recite --data_dir $(DATA) --out_dir $(or $(RECITE_OUT),out/recite) \
		--recipe $(if $(filter command line,$(origin RECIPE)),$(RECIPE),recite-cpu) \
		--seeds $(or $(SEEDS),0) --variant $(or $(VARIANT),rope) $(if $(EPOCHS),--pretrain_epochs $(EPOCHS)) \
		$(if $(N_EMBD),--n_embd $(N_EMBD)) \
		$(if $(SPAN),--answer_from_recitation) $(if $(CONTINUE),--continue_recitation) \
		$(if $(CHOOSE),--choose_final_questions) $(if $(RESUME),--resume)

best:            ## chargpt/recipes/best-fast.yaml step by step (the reference size, 12 epochs or 24 with VARIANT=learned, no finetuning; one rope seed end to end on 2 CPU cores: see docs/results-recitation.md); RECIPE=best runs the 50-epoch recipe with its rate's choice: make best DATA=dir [SEEDS=0,1,2] [RECIPE=best] [VARIANT=learned] [EPOCHS=12] [RESUME=1]
	$(MAKE) recite RECIPE=$(if $(filter command line,$(origin RECIPE)),$(RECIPE),best-fast) RECITE_OUT=$(or $(RECITE_OUT),out/best)

lint:            ## ruff, as CI runs it
	. .venv/bin/activate && ruff check .

help:            ## these targets, each with what it does and the variables it takes
	@grep -E '^[a-z]+: +## ' $(MAKEFILE_LIST) | sed -E 's/: +## /\t/' | expand -t 10
