"""The link graph as a whole: statistics, exports for Gephi/networkx/Graphviz, and charts.

Pages are nodes and links between known pages are edges; ``load`` turns the store into
compact numpy arrays once, and everything else (degrees, PageRank, components,
reachability, exports) works on those arrays, so a million links cost megabytes, not
a Python object each.
"""
