import schemdraw
import schemdraw.elements as elm

# voltage divider: Vout is taken at the dot between R1 and R2
with schemdraw.Drawing() as d:
    d.config(unit=3)
    V1 = elm.SourceV().up().label(('−', 'V1\n9V', '+'))
    elm.Resistor().right().label('R1\n10kΩ')
    elm.Dot().label('Vout', loc='right')
    elm.Resistor().down().label('R2\n10kΩ', loc='bottom')
    elm.Line().left().tox(V1.start)
    elm.Ground().at(V1.start)
