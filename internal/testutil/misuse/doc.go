// Package misuse holds goverbs' misuse matrix, a test only: every exported
// method of every object, called on a closed object and with zero
// arguments on an open one, must return a typed error (or succeed), never
// panic or hang. The methods are found by reflection, so a method added
// later is covered without changing the test.
package misuse
