"""Everything loaded into the student's process, and nothing else: the trust boundary.

    main.py         the child's entry and request loop
    confine.py      what the child does to itself before the student's import
    protocol.py     the data-only frames both sides speak (no pickle)
    load.py         finding and importing the submission (module, file, notebook)
    exports.py      a notebook's or percent file's exported cells, and its stubs
    audit.py        the arrays that record block products (the tiling audit)
    fingerprint.py  code fingerprints, to find the reference's code alive in the child

No module here imports the grader, the references, the reference solution or the class grader
(tests/test_boundary.py checks it in a real child).
"""
