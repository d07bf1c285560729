"""Every output a person or a grader reads, one renderer per output, all fed by the result model
(tinytorch.milestone07.results) and its diagnosis (tinytorch.milestone07.diagnose).

    terminal.py         the terminal report of `tito milestone run`
    notebook_tables.py  Part A as HTML and text tables in the notebook
    notebook_record.py  what the notebook records for the headless grader (MIME outputs)
    json_doc.py         the machine-readable result (`--json`) and its schema
    platforms.py        gradebook rows, Gradescope and PrairieLearn results
    resultfile.py       result files nobody else can write
"""
