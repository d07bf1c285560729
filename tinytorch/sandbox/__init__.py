"""Running untrusted code: a contained child process that answers requests, and its tree kept in
hand. Knows nothing of a milestone (what it must know of the graded module comes in a `Graded`).

    parent.py   the Sandbox: starts the child, sends requests, checks every reply
    spawn.py    how the child is started (namespaces, environment, private workdir)
    procs.py    the one process-tree kill/watch (the class grader's too)
    uids.py     the uid pools (one per sandbox, one per class-grading slot)
    child/      everything loaded into the student's process, and nothing else

Nothing is imported here: the child imports this package on its way to `child/`.
"""
