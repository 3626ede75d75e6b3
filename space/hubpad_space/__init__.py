"""hubpad's Space: a web page where a signed-in Hugging Face user names a model, picks a tensor-parallel size and gets
a padded derivative in their namespace. Every padding rule is hubpad's library; this package only wires a page to it
(handlers.py), runs mirrors one at a time (runs.py, job.py) and says what happened in plain words (view.py,
explain.py)."""
