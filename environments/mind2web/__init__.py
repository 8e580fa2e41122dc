"""Mind2Web's offline protocol as a CDWM suite (`cdwm-mind2web`); see README.md."""
