"""BLEnD (Myung et al., NeurIPS 2024): everyday-culture questions about 16 countries in their
local languages and in English, each answered by five annotators; its own package."""
