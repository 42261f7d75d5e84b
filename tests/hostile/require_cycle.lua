-- A module that requires itself (used by recursion_require.lua).
return require("require_cycle")
