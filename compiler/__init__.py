"""TVM-style compiler: tensor expressions, schedules, lowering passes, operators.

Not built yet: this package arrives with issue [3/6] (see README, "Status").
"""
