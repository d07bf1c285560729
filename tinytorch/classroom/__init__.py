"""Grading a whole class: discovery, parallel grading, scoring, platform results, similarity, report.

Data flows one way: submissions (discover) -> runner (one `tito milestone run 07` process tree per
student, a milestone JSON doc each) -> scoring (the one home for points) -> gradebook / Gradescope /
PrairieLearn results, and -> similarity + class report.
"""
